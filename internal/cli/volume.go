package cli

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kelpfs/kelp/internal/security"
	"github.com/kelpfs/kelp/internal/store"
	"github.com/kelpfs/kelp/internal/volumeserver"
)

// volumeFlags are the flags of `kelp volume`; `kelp server` embeds them with a
// "volume." prefix.
type volumeFlags struct {
	addr       addrFlags
	port       int
	publicURL  string
	dirs       string
	max        string
	masters    string
	dataCenter string
	rack       string
	fsync      bool
}

func (f *volumeFlags) addFlags(fl *pflag.FlagSet, prefix string) {
	fl.IntVar(&f.port, prefix+"port", 8080, "volume server HTTP port (its gRPC port is this + 10000)")
	fl.StringVar(&f.publicURL, prefix+"public-url", "", "host:port clients use to reach this server (default ip:port)")
	fl.StringVar(&f.max, prefix+"max", "8", "maximum volumes per disk; one value, or one per --dir entry")
	fl.StringVar(&f.dataCenter, prefix+"data-center", "", "data center of this server")
	fl.StringVar(&f.rack, prefix+"rack", "", "rack of this server")
	fl.BoolVar(&f.fsync, "fsync", true, "acknowledge a write only after it is synced to disk (group commit)")
}

// config builds the volume server configuration; dirs may come from --dir.
func (f *volumeFlags) config(log *slog.Logger) (volumeserver.Config, error) {
	bind, err := f.addr.bindIP()
	if err != nil {
		return volumeserver.Config{}, err
	}
	dirs := splitList(f.dirs)
	if len(dirs) == 0 {
		return volumeserver.Config{}, fmt.Errorf("--dir is required")
	}
	maxes := splitList(f.max)
	if len(maxes) != 1 && len(maxes) != len(dirs) {
		return volumeserver.Config{}, fmt.Errorf("--max has %d values for %d directories", len(maxes), len(dirs))
	}
	disks := make([]store.DiskConfig, len(dirs))
	for i, d := range dirs {
		m := maxes[0]
		if len(maxes) > 1 {
			m = maxes[i]
		}
		n, err := strconv.Atoi(m)
		if err != nil || n < 0 {
			return volumeserver.Config{}, fmt.Errorf("--max: %q is not a number of volumes", m)
		}
		disks[i] = store.DiskConfig{Dir: d, MaxVolumes: n}
	}
	return volumeserver.Config{
		IP:         f.addr.ip,
		BindIP:     bind,
		Port:       f.port,
		PublicURL:  f.publicURL,
		Masters:    splitList(f.masters),
		DataCenter: f.dataCenter,
		Rack:       f.rack,
		Disks:      disks,
		Fsync:      f.fsync,
		Logger:     log,
		// For A/B measurements of the fast read path (docs/benchmark.md).
		NoFastRead:  os.Getenv("KELP_NO_FAST_READ") != "",
		NoFastWrite: os.Getenv("KELP_NO_FAST_WRITE") != "",
		// The short-circuit for readers on this host (docs/volume-server.md).
		NoLocalReads: os.Getenv("KELP_NO_LOCAL_READS") != "",
	}, nil
}

func newVolumeCommand(g *globalFlags) *cobra.Command {
	f := &volumeFlags{}
	af := &authFlags{}
	var mx metricsFlags
	cmd := &cobra.Command{
		Use:   "volume",
		Short: "Run a volume server: stores file data in volumes on local disks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			cfg, err := f.config(log)
			if err != nil {
				return err
			}
			if len(cfg.Masters) == 0 {
				return fmt.Errorf("--master is required")
			}
			sec, err := af.setup()
			if err != nil {
				return err
			}
			cfg.Signer, cfg.ReadSigner, cfg.Access, cfg.Audit = sec.signer, sec.readSigner, sec.access, sec.audit
			cfg.Metrics = mx.registry()
			v, err := volumeserver.New(cfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "volume server listening on %s\n", security.URL(v.URL()))
			stopMetrics, err := mx.start(cfg.BindIP, cmd.OutOrStdout())
			if err != nil {
				v.Close()
				return err
			}
			defer stopMetrics()
			ctx, stop := signalContext()
			defer stop()
			return runAll(ctx, v)
		},
	}
	fl := cmd.Flags()
	f.addr.addFlags(fl, "volume server")
	fl.StringVar(&f.dirs, "dir", "", "data directories, one per disk, comma-separated (required)")
	fl.StringVar(&f.masters, "master", "127.0.0.1:9333", "master addresses host:port[,host:port...]")
	f.addFlags(fl, "")
	af.addFlags(fl, true, false) // --access.tokens: the shell's tokens on the admin gRPC API
	mx.addFlags(fl, 0)
	return cmd
}
