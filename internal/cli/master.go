package cli

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kelpfs/kelp/internal/master"
	"github.com/kelpfs/kelp/internal/security"
	"github.com/kelpfs/kelp/internal/shell"
)

// masterFlags are the flags of `kelp master`; `kelp server` embeds them with a
// "master." prefix.
type masterFlags struct {
	addr               addrFlags
	port               int
	mdir               string
	peers              string
	volumeSizeLimitMB  int64
	defaultReplication string
	raftTimeout        time.Duration
	ecRebuildAfter     time.Duration
}

// addFlags registers the flags under prefix ("" or "master.").
func (f *masterFlags) addFlags(fl *pflag.FlagSet, prefix string) {
	fl.IntVar(&f.port, prefix+"port", 9333, "master HTTP port (its gRPC port is this + 10000)")
	fl.StringVar(&f.peers, prefix+"peers", "", "all masters of the Raft group, host:port,... (empty: a single master)")
	fl.Int64Var(&f.volumeSizeLimitMB, prefix+"volume-size-limit-mb", 30*1024, "a volume is full at this size, in MiB")
	fl.StringVar(&f.defaultReplication, prefix+"default-replication", "000", "replication code XYZ for new volumes unless a request says otherwise (initial value; change it at run time with cluster.configure)")
	// Not prefixed: `kelp server --ec.rebuild-after` as `kelp master --ec.rebuild-after`.
	fl.DurationVar(&f.ecRebuildAfter, "ec.rebuild-after", 0, "the leader rebuilds an EC volume's missing shards by itself once they have been missing this long, e.g. 15m (0: manual only, ec.rebuild)")
	fl.DurationVar(&f.raftTimeout, prefix+"raft-timeout", 400*time.Millisecond, "Raft heartbeat and election timeout: a dead leader is replaced within about 2-3 of these (raft port is the HTTP port + 20000)")
}

func (f *masterFlags) config(log *slog.Logger) (master.Config, error) {
	bind, err := f.addr.bindIP()
	return master.Config{
		IP:                   f.addr.ip,
		BindIP:               bind,
		Port:                 f.port,
		MetaDir:              f.mdir,
		Peers:                splitList(f.peers),
		VolumeSizeLimit:      f.volumeSizeLimitMB << 20,
		DefaultReplication:   f.defaultReplication,
		RaftHeartbeatTimeout: f.raftTimeout,
		PulseInterval:        5 * time.Second,
		EcRebuildAfter:       f.ecRebuildAfter,
		RunShell:             shell.RunScriptOn,
		Logger:               log,
		// For A/B measurements of the fast assign path (docs/benchmark.md).
		NoFastAssign: os.Getenv("KELP_NO_FAST_ASSIGN") != "",
	}, err
}

func newMasterCommand(g *globalFlags) *cobra.Command {
	f := &masterFlags{}
	af := &authFlags{}
	var mx metricsFlags
	uf := &adminFlags{}
	cmd := &cobra.Command{
		Use:   "master",
		Short: "Run a master: topology, file id assignment, volume growth (Raft-replicated)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			if f.mdir == "" {
				return fmt.Errorf("--mdir is required: the master keeps its Raft log there")
			}
			cfg, err := f.config(log)
			if err != nil {
				return err
			}
			sec, err := af.setup()
			if err != nil {
				return err
			}
			sec.applyMaster(&cfg)
			cfg.Metrics = mx.registry()
			if err := uf.mountAdminUI(&cfg, log, "", cmd.OutOrStdout()); err != nil {
				return err
			}
			m, err := master.New(cfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "master listening on %s\n", security.URL(m.HTTPAddr()))
			stopMetrics, err := mx.start(cfg.BindIP, cmd.OutOrStdout())
			if err != nil {
				m.Close()
				return err
			}
			defer stopMetrics()
			ctx, stop := signalContext()
			defer stop()
			return runAll(ctx, m)
		},
	}
	fl := cmd.Flags()
	f.addr.addFlags(fl, "master")
	fl.StringVar(&f.mdir, "mdir", "", "directory for the master's Raft log and snapshots (required)")
	f.addFlags(fl, "")
	af.addFlags(fl, true, true)
	mx.addFlags(fl, 0)
	uf.addFlags(fl)
	return cmd
}
