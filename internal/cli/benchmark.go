package cli

import (
	"github.com/spf13/cobra"

	"github.com/kelpfs/kelp/internal/benchmark"
)

func newBenchmarkCommand(g *globalFlags) *cobra.Command {
	var masters string
	cfg := benchmark.Config{}
	cmd := &cobra.Command{
		Use:   "benchmark",
		Short: "Write N files through assign + upload, then read them back in random order",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Masters = splitList(masters)
			cfg.Out = cmd.OutOrStdout()
			cfg.Progress = cmd.ErrOrStderr()
			ctx, stop := signalContext()
			defer stop()
			_, err := benchmark.Run(ctx, cfg)
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&masters, "master", "127.0.0.1:9333", "master addresses host:port[,host:port...]")
	fl.IntVar(&cfg.N, "n", 100000, "number of files")
	fl.IntVar(&cfg.Size, "size", 1024, "size of each file in bytes")
	fl.IntVar(&cfg.Concurrency, "concurrency", 16, "concurrent requests")
	fl.StringVar(&cfg.Collection, "collection", "", "collection to write into")
	fl.StringVar(&cfg.Replication, "replication", "", "replication code XYZ (default: the cluster's)")
	fl.BoolVar(&cfg.JSON, "json", false, "print one JSON object with the results as the last line")
	return cmd
}
