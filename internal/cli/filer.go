package cli

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/security"
)

// filerFlags are the flags of `kelp filer`; `kelp server` embeds them with a
// "filer." prefix (--filer.port, --filer.store, --filer.store.dsn, ...) and
// sets addr, masters and dir itself.
type filerFlags struct {
	addr        addrFlags
	port        int
	masters     string
	store       string
	storeDSN    string
	dir         string
	chunkMiB    int
	collection  string
	replication string
	retention   time.Duration
	encryptData bool
}

func (f *filerFlags) addFlags(fl *pflag.FlagSet, prefix string) {
	fl.IntVar(&f.port, prefix+"port", 8888, "filer HTTP port (its gRPC port is this + 10000)")
	fl.StringVar(&f.store, prefix+"store", filerserver.StoreEmbedded, "metadata store: embedded, postgres or redis (postgres and redis let several filers share one namespace)")
	fl.StringVar(&f.storeDSN, prefix+"store.dsn", "", "store address: postgres://user@host:port/db or redis://host:port/db")
	fl.IntVar(&f.chunkMiB, prefix+"chunk-size", 8, "size in MiB of the chunks large files are cut into")
	fl.StringVar(&f.collection, prefix+"collection", "", "collection of the chunks the filer writes")
	fl.StringVar(&f.replication, prefix+"replication", "", "replication of the chunks the filer writes (default: the master's)")
	fl.BoolVar(&f.encryptData, prefix+"encrypt-data", false, "encrypt every chunk written (AES-256-GCM, a random key per chunk kept in the filer's metadata): also for S3, WebDAV and mounts")
	fl.DurationVar(&f.retention, prefix+"event-retention", 7*24*time.Hour, "how long metadata events are kept for subscribers (0: forever)")
}

// config builds the filer server configuration.
func (f *filerFlags) config(log *slog.Logger) (filerserver.Config, error) {
	if f.chunkMiB <= 0 || f.chunkMiB > 1024 {
		return filerserver.Config{}, fmt.Errorf("--chunk-size: %d MiB is not between 1 and 1024", f.chunkMiB)
	}
	switch f.store {
	case filerserver.StoreEmbedded:
		if f.dir == "" {
			return filerserver.Config{}, fmt.Errorf("--dir is required for the embedded store")
		}
	case filerserver.StorePostgres, filerserver.StoreRedis:
		if f.storeDSN == "" {
			return filerserver.Config{}, fmt.Errorf("--store=%s needs --store.dsn", f.store)
		}
	default:
		return filerserver.Config{}, fmt.Errorf("--store: %q is not embedded, postgres or redis", f.store)
	}
	if f.retention < 0 {
		return filerserver.Config{}, fmt.Errorf("--event-retention: %v is negative", f.retention)
	}
	masters := splitList(f.masters)
	if len(masters) == 0 {
		return filerserver.Config{}, fmt.Errorf("--master is required")
	}
	bind, err := f.addr.bindIP()
	if err != nil {
		return filerserver.Config{}, err
	}
	return filerserver.Config{
		IP:             f.addr.ip,
		BindIP:         bind,
		Port:           f.port,
		Masters:        masters,
		Store:          f.store,
		StoreDSN:       f.storeDSN,
		Dir:            f.dir,
		ChunkSize:      f.chunkMiB << 20,
		Collection:     f.collection,
		Replication:    f.replication,
		EventRetention: f.retention,
		EncryptData:    f.encryptData,
		Logger:         log,
	}, nil
}

func newFilerCommand(g *globalFlags) *cobra.Command {
	f := &filerFlags{}
	af := &authFlags{}
	var mx metricsFlags
	cmd := &cobra.Command{
		Use:   "filer",
		Short: "Run a filer: directories and files over the cluster, HTTP and gRPC APIs",
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
			sec, err := af.setup()
			if err != nil {
				return err
			}
			cfg.Signer, cfg.ReadSigner, cfg.Access, cfg.Audit, cfg.AccessToken = sec.signer, sec.readSigner, sec.access, sec.audit, sec.token
			cfg.Metrics = mx.registry()
			s, err := filerserver.New(cfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "filer listening on %s (gRPC %s)\n", security.URL(s.Addr()), s.GRPCAddr())
			stopMetrics, err := mx.start(cfg.BindIP, cmd.OutOrStdout())
			if err != nil {
				s.Close()
				return err
			}
			defer stopMetrics()
			ctx, stop := signalContext()
			defer stop()
			return runAll(ctx, s)
		},
	}
	fl := cmd.Flags()
	f.addr.addFlags(fl, "filer")
	fl.StringVar(&f.masters, "master", "127.0.0.1:9333", "master addresses host:port[,host:port...]")
	fl.StringVar(&f.dir, "dir", "./filer", "directory of the embedded metadata store")
	f.addFlags(fl, "")
	af.addFlags(fl, true, true)
	mx.addFlags(fl, 0)
	return cmd
}
