package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/backup"
	"github.com/kelpfs/kelp/internal/filersync"
	"github.com/kelpfs/kelp/internal/pb"
	"github.com/kelpfs/kelp/internal/security"
)

// newFilerSyncCommand is `kelp filer.sync`: two filers of two clusters kept
// identical, active-active, until SIGINT/SIGTERM.
func newFilerSyncCommand(g *globalFlags) *cobra.Command {
	var a, b, p, aPath, bPath, statusAddr, aToken, bToken string
	var workers int
	var logEvery time.Duration
	var mx metricsFlags
	cmd := &cobra.Command{
		Use:   "filer.sync",
		Short: "Keep a directory of two clusters' filers identical, both ways (active-active)",
		Long: `Keep a directory of two independent clusters identical, both ways: follows both filers'
metadata event logs and copies every change to the other side (data from the source cluster's
volume servers to the target's). Positions are stored in each target filer under /.kelp/sync, so a
restart resumes where it stopped. Concurrent changes of one path: the newer mtime wins, a tie goes
to the cluster with the greater id. See docs/filer-sync.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			if a == "" || b == "" {
				return errors.New("--a and --b are required (the filers' host:port)")
			}
			ga, err := pb.GRPCAddress(a)
			if err != nil {
				return fmt.Errorf("--a: %w", err)
			}
			gb, err := pb.GRPCAddress(b)
			if err != nil {
				return fmt.Errorf("--b: %w", err)
			}
			if aPath == "" {
				aPath = p
			}
			if bPath == "" {
				bPath = p
			}
			if logEvery == 0 {
				logEvery = -1
			}
			ctx, stop := signalContext()
			defer stop()
			at, err := clientToken(aToken)
			if err != nil {
				return fmt.Errorf("--a.access.token: %w", err)
			}
			bt, err := clientToken(bToken)
			if err != nil {
				return fmt.Errorf("--b.access.token: %w", err)
			}
			s, err := filersync.New(ctx, filersync.Config{A: ga, B: gb, APath: aPath, BPath: bPath, Workers: workers, AToken: at, BToken: bt,
				LogEvery: logEvery, ConnectTimeout: time.Minute, Logger: log})
			if err != nil {
				return err
			}
			defer s.Close()
			registerSyncMetrics(mx.registry(), s)
			stopMetrics, err := mx.start("", cmd.OutOrStdout())
			if err != nil {
				return err
			}
			defer stopMetrics()
			sa, sb := s.Sites()
			fmt.Fprintf(cmd.OutOrStdout(), "filer.sync %s%s (cluster %s) <-> %s%s (cluster %s)\n", a, aPath, sa.ID, b, bPath, sb.ID)
			if statusAddr != "" {
				ln, err := net.Listen("tcp", statusAddr)
				if err != nil {
					return fmt.Errorf("--status: %w", err)
				}
				ln = security.Process().Listen(ln, security.ClusterHTTP)
				srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					json.NewEncoder(w).Encode(s.Status(r.Context()))
				}), ReadHeaderTimeout: 10 * time.Second}
				go srv.Serve(ln)
				defer srv.Shutdown(context.Background())
				fmt.Fprintf(cmd.OutOrStdout(), "status on %s/\n", security.URL(ln.Addr().String()))
			}
			return s.Run(ctx)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&a, "a", "", "filer A, host:port of its HTTP API (gRPC is that + 10000)")
	fl.StringVar(&b, "b", "", "filer B, host:port of its HTTP API (gRPC is that + 10000)")
	fl.StringVar(&p, "path", "/", "directory kept in sync on both sides")
	fl.StringVar(&aPath, "a.path", "", "directory on A (default --path)")
	fl.StringVar(&bPath, "b.path", "", "directory on B (default --path)")
	fl.IntVar(&workers, "workers", 8, "files copied at once in each direction")
	fl.DurationVar(&logEvery, "log-every", 10*time.Second, "log positions and lag this often (0: never)")
	fl.StringVar(&statusAddr, "status", "", "serve the positions and lag as JSON on this host:port")
	fl.StringVar(&aToken, "a.access.token", "", "access token for cluster A's filer and masters (@FILE reads it from FILE; default env KELP_ACCESS_TOKEN)")
	fl.StringVar(&bToken, "b.access.token", "", "access token for cluster B's filer and masters (@FILE reads it from FILE; default env KELP_ACCESS_TOKEN)")
	mx.addFlags(fl, 0)
	return cmd
}

// backupFlags are the flags filer.backup and filer.restore share.
type backupFlags struct {
	filer, path, location string
	workers               int
	s3                    backup.S3Config
	accessToken           string
	encryptKey            string
	plaintext             bool
}

func (f *backupFlags) add(cmd *cobra.Command, locFlag, locHelp string) {
	fl := cmd.Flags()
	fl.StringVar(&f.filer, "filer", "127.0.0.1:8888", "filer address host:port (its HTTP port; gRPC is that + 10000)")
	fl.StringVar(&f.path, "path", "/", "filer directory")
	fl.StringVar(&f.location, locFlag, "", locHelp)
	fl.IntVar(&f.workers, "workers", 8, "files copied at once")
	addAccessTokenFlag(fl, &f.accessToken)
	fl.StringVar(&f.encryptKey, "encrypt.key", "", "encrypt the backup's content with AES-256-GCM under this secret (at least 16 characters; @FILE reads it from FILE; env KELP_BACKUP_KEY); restore needs the same")
	if locFlag == "dest" {
		fl.BoolVar(&f.plaintext, "plaintext", false, "allow an unencrypted backup of a filer that encrypts data at rest")
	}
	fl.StringVar(&f.s3.Endpoint, "s3.endpoint", "", "S3 endpoint URL for s3:// locations (default AWS); keys from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	fl.StringVar(&f.s3.Region, "s3.region", "us-east-1", "S3 region")
}

func (f *backupFlags) config(ctx context.Context, g *globalFlags, locFlag string) (backup.Config, error) {
	log, err := g.logger()
	if err != nil {
		return backup.Config{}, err
	}
	if f.location == "" {
		return backup.Config{}, fmt.Errorf("--%s is required (a directory or s3://bucket/prefix)", locFlag)
	}
	addr, err := pb.GRPCAddress(f.filer)
	if err != nil {
		return backup.Config{}, fmt.Errorf("--filer: %w", err)
	}
	f.s3.AccessKey, f.s3.SecretKey = os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	dest, err := backup.OpenDest(ctx, f.location, f.s3)
	if err != nil {
		return backup.Config{}, fmt.Errorf("--%s: %w", locFlag, err)
	}
	tok, err := clientToken(f.accessToken)
	if err != nil {
		return backup.Config{}, err
	}
	var key []byte
	if v := cmp.Or(f.encryptKey, os.Getenv("KELP_BACKUP_KEY")); v != "" {
		secret, err := auth.TokenFromFlag(v)
		if err != nil {
			return backup.Config{}, fmt.Errorf("--encrypt.key: %w", err)
		}
		if key, err = backup.DeriveKey(secret); err != nil {
			return backup.Config{}, fmt.Errorf("--encrypt.key: %w", err)
		}
	}
	return backup.Config{Filer: addr, Path: f.path, Dest: dest, Workers: f.workers, Logger: log, AccessToken: tok, Key: key, Plaintext: f.plaintext}, nil
}

// newFilerBackupCommand is `kelp filer.backup`.
func newFilerBackupCommand(g *globalFlags) *cobra.Command {
	var f backupFlags
	var once bool
	var mx metricsFlags
	cmd := &cobra.Command{
		Use:   "filer.backup",
		Short: "Back up a filer directory to a local directory or S3, incrementally",
		Long: `Back up a filer directory to a local directory or s3://bucket/prefix. The first run copies the
tree; later runs (and a running backup) apply the filer's metadata events from the position stored
in the destination, so only what changed is copied. Runs until SIGINT/SIGTERM, or with --once until
it has caught up with the changes made before it started.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signalContext()
			defer stop()
			cfg, err := f.config(ctx, g, "dest")
			if err != nil {
				return err
			}
			cfg.Once = once
			cfg.Stats = &backup.Stats{}
			registerBackupMetrics(mx.registry(), cfg.Stats)
			stopMetrics, err := mx.start("", cmd.OutOrStdout())
			if err != nil {
				return err
			}
			defer stopMetrics()
			t0 := time.Now()
			st, err := backup.Backup(ctx, cfg)
			if st != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "backup of %s%s to %s: %d files copied (%d bytes), %d deleted, %d renamed, %d full scans, at event %d, %v\n",
					f.filer, f.path, f.location, st.Copied.Load(), st.Bytes.Load(), st.Deleted.Load(), st.Renamed.Load(),
					st.FullScans.Load(), st.Seq.Load(), time.Since(t0).Round(time.Millisecond))
			}
			return err
		},
	}
	f.add(cmd, "dest", "where the backup goes: a directory or s3://bucket/prefix")
	cmd.Flags().BoolVar(&once, "once", false, "stop when caught up instead of following new changes")
	mx.addFlags(cmd.Flags(), 0)
	return cmd
}

// newFilerRestoreCommand is `kelp filer.restore`.
func newFilerRestoreCommand(g *globalFlags) *cobra.Command {
	var f backupFlags
	cmd := &cobra.Command{
		Use:   "filer.restore",
		Short: "Restore a filer directory from a backup made by filer.backup",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signalContext()
			defer stop()
			cfg, err := f.config(ctx, g, "src")
			if err != nil {
				return err
			}
			t0 := time.Now()
			st, err := backup.Restore(ctx, cfg)
			if st != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "restore of %s into %s%s: %d files written (%d bytes), %d already there, %v\n",
					f.location, f.filer, f.path, st.Copied.Load(), st.Bytes.Load(), st.Skipped.Load(), time.Since(t0).Round(time.Millisecond))
			}
			return err
		},
	}
	f.add(cmd, "src", "the backup: a directory or s3://bucket/prefix")
	return cmd
}
