package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/kelpfs/kelp/internal/filersync"
	"github.com/kelpfs/kelp/internal/pb"
)

// newFilerSyncCommand is `kelp filer.sync`: two filers of two clusters kept
// identical, active-active, until SIGINT/SIGTERM.
func newFilerSyncCommand(g *globalFlags) *cobra.Command {
	var a, b, p, aPath, bPath, statusAddr string
	var workers int
	var logEvery time.Duration
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
			s, err := filersync.New(ctx, filersync.Config{A: ga, B: gb, APath: aPath, BPath: bPath, Workers: workers,
				LogEvery: logEvery, ConnectTimeout: time.Minute, Logger: log})
			if err != nil {
				return err
			}
			defer s.Close()
			sa, sb := s.Sites()
			fmt.Fprintf(cmd.OutOrStdout(), "filer.sync %s%s (cluster %s) <-> %s%s (cluster %s)\n", a, aPath, sa.ID, b, bPath, sb.ID)
			if statusAddr != "" {
				ln, err := net.Listen("tcp", statusAddr)
				if err != nil {
					return fmt.Errorf("--status: %w", err)
				}
				srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					json.NewEncoder(w).Encode(s.Status(r.Context()))
				}), ReadHeaderTimeout: 10 * time.Second}
				go srv.Serve(ln)
				defer srv.Shutdown(context.Background())
				fmt.Fprintf(cmd.OutOrStdout(), "status on http://%s/\n", ln.Addr())
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
	return cmd
}
