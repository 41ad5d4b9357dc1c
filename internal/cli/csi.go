package cli

import (
	"github.com/spf13/cobra"

	"github.com/kelpfs/kelp/internal/csi"
)

// newCSICommand is `kelp csi`: the Container Storage Interface driver
// (controller and/or node plugin) on a unix socket; see docs/csi.md.
func newCSICommand(g *globalFlags) *cobra.Command {
	var cfg csi.Config
	var endpoint string
	cmd := &cobra.Command{
		Use:   "csi",
		Short: "Run the CSI driver (Kubernetes volumes as filer directories with quotas)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			cfg.Logger = log
			csi.Version = Version
			d, err := csi.New(cfg)
			if err != nil {
				return err
			}
			l, err := csi.Listen(endpoint)
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			log.Info("kelp csi serving", "endpoint", endpoint, "filer", cfg.Filer, "controller", cfg.Controller, "node", cfg.Node)
			return d.Run(ctx, l)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&endpoint, "endpoint", "unix:///csi/csi.sock", "CSI endpoint: unix:///path/csi.sock or tcp://host:port")
	fl.StringVar(&cfg.Filer, "filer", "127.0.0.1:8888", "filer address host:port (its HTTP port; gRPC is that + 10000)")
	fl.StringVar(&cfg.NodeID, "node-id", "", "this node's name (required with --node)")
	fl.BoolVar(&cfg.Controller, "controller", false, "serve the controller service (create, delete, expand volumes)")
	fl.BoolVar(&cfg.Node, "node", false, "serve the node service (stage and publish volumes with FUSE)")
	fl.StringVar(&cfg.VolumeRoot, "volume-root", "/csi-volumes", "filer directory holding one directory per volume")
	fl.StringVar(&cfg.StateDir, "state-dir", "/var/lib/kelp-csi", "where the node plugin records its mounts, to restore them after a restart")
	fl.Int64Var(&cfg.DefaultCapacity, "default-capacity", 1<<30, "capacity in bytes of a volume requested without one")
	fl.BoolVar(&cfg.SyncClose, "sync-close", true, "close(2) commits the file before it returns, so a write past the volume's capacity fails there with ENOSPC (false: only fsync reports it; faster for many small files)")
	fl.StringVar(&cfg.Collection, "collection", "", "collection of the chunks written through volumes (default: the filer's)")
	fl.StringVar(&cfg.Replication, "replication", "", "replication of the chunks written through volumes (default: the filer's)")
	return cmd
}
