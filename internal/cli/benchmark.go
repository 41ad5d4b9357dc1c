package cli

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kelpfs/kelp/internal/benchmark"
	"github.com/kelpfs/kelp/internal/benchmark/s3bench"
	"github.com/kelpfs/kelp/internal/benchmark/suite"
)

func newBenchmarkCommand(g *globalFlags) *cobra.Command {
	var masters, accessToken string
	cfg := benchmark.Config{}
	cmd := &cobra.Command{
		Use:   "benchmark",
		Short: "Write N files through assign + upload, then read them back in random order",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Masters = splitList(masters)
			tok, err := clientToken(accessToken)
			if err != nil {
				return err
			}
			cfg.AccessToken = tok
			cfg.Out = cmd.OutOrStdout()
			cfg.Progress = cmd.ErrOrStderr()
			ctx, stop := signalContext()
			defer stop()
			rep, err := benchmark.Run(ctx, cfg)
			if err != nil {
				return err
			}
			// The report shows failures, and so must the exit status:
			// scripts and CI look at that.
			return rep.Err()
		},
	}
	fl := cmd.Flags()
	addAccessTokenFlag(fl, &accessToken)
	fl.StringVar(&masters, "master", "127.0.0.1:9333", "master addresses host:port[,host:port...]")
	fl.IntVar(&cfg.N, "n", 100000, "number of files")
	fl.IntVar(&cfg.Size, "size", 1024, "size of each file in bytes")
	fl.IntVar(&cfg.Concurrency, "concurrency", 16, "concurrent requests")
	fl.StringVar(&cfg.Collection, "collection", "", "collection to write into")
	fl.StringVar(&cfg.Replication, "replication", "", "replication code XYZ (default: the cluster's)")
	fl.BoolVar(&cfg.JSON, "json", false, "print one JSON object with the results as the last line")
	fl.BoolVar(&cfg.Cold, "cold", false, coldUsage)
	fl.BoolVar(&cfg.NetHTTP, "net-http", false, "send every request through net/http (the library client) instead of the benchmark's lean HTTP/1.1 client")
	fl.StringVar(&cfg.Save, "save", "", "write the list of files written to this file, for a later --reads-from")
	fl.StringVar(&cfg.ReadsFrom, "reads-from", "", "skip writing; read the files listed by an earlier --save again (e.g. after ec.encode)")
	cmd.AddCommand(newS3BenchmarkCommand(g))
	cmd.AddCommand(newSuiteBenchmarkCommand())
	return cmd
}

// newSuiteBenchmarkCommand is `kelp benchmark suite`: the workloads of
// docs/benchmark.md#side-by-side against one cluster, with the disk and
// loopback limits measured in the same run (make bench-compare).
func newSuiteBenchmarkCommand() *cobra.Command {
	var masters string
	cfg := suite.Config{}
	cmd := &cobra.Command{
		Use:   "suite",
		Short: "Run the filer, small-file and S3 workloads side by side with the disk and loopback limits, as one table",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Masters = splitList(masters)
			if cfg.AccessKey == "" && cfg.SecretKey == "" {
				cfg.AccessKey, cfg.SecretKey = os.Getenv("KELP_ACCESS_KEY"), os.Getenv("KELP_SECRET_KEY")
			}
			cfg.Out, cfg.Progress = cmd.OutOrStdout(), cmd.ErrOrStderr()
			ctx, stop := signalContext()
			defer stop()
			res, err := suite.Run(ctx, cfg)
			if err != nil {
				return err
			}
			return res.Err()
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&masters, "master", "127.0.0.1:9333", `master addresses for the 1 KiB workload ("" skips it)`)
	fl.StringVar(&cfg.Filer, "filer", "127.0.0.1:8888", `filer host:port for the 64 KiB workloads ("" skips them)`)
	fl.StringVar(&cfg.S3, "s3", "http://127.0.0.1:8333", `S3 endpoint ("" skips the S3 workloads)`)
	fl.StringVar(&cfg.AccessKey, "access-key", "", "S3 access key (or env KELP_ACCESS_KEY)")
	fl.StringVar(&cfg.SecretKey, "secret-key", "", "S3 secret key (or env KELP_SECRET_KEY)")
	fl.Float64Var(&cfg.Scale, "scale", 1, "multiply every workload's size (0.05 for a quick run)")
	fl.StringVar(&cfg.Dir, "dir", "", "directory for the disk-limit file (the volume servers' disk; default the temp dir)")
	fl.IntVar(&cfg.Concurrency, "concurrency", 16, "clients per workload")
	return cmd
}

// coldUsage explains --cold: without it the read phase measures memory.
const coldUsage = "drop this machine's page cache (sync; echo 1 > /proc/sys/vm/drop_caches, needs root on Linux) " +
	"between writing and reading, so reads come from disk; without it they come from the page cache the writes filled"

// newS3BenchmarkCommand is `kelp benchmark s3`: PUT then GET objects through
// an S3 endpoint with the AWS SDK for Go v2.
func newS3BenchmarkCommand(g *globalFlags) *cobra.Command {
	cfg := s3bench.Config{}
	size, part := byteSize(1024), byteSize(s3bench.DefaultPartSize)
	cmd := &cobra.Command{
		Use:   "s3",
		Short: "Put N objects through an S3 endpoint, then get them back in random order",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.AccessKey == "" && cfg.SecretKey == "" {
				cfg.AccessKey, cfg.SecretKey = os.Getenv("KELP_ACCESS_KEY"), os.Getenv("KELP_SECRET_KEY")
			}
			cfg.Size, cfg.PartSize = int64(size), int64(part)
			cfg.Out = cmd.OutOrStdout()
			cfg.Progress = cmd.ErrOrStderr()
			if log, err := g.logger(); err == nil {
				cfg.Logger = log
			}
			ctx, stop := signalContext()
			defer stop()
			rep, err := s3bench.Run(ctx, cfg)
			if err != nil {
				return err
			}
			return rep.Err()
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cfg.Endpoint, "endpoint", "http://127.0.0.1:8333", "S3 endpoint URL")
	fl.StringVar(&cfg.AccessKey, "access-key", "", "access key (or env KELP_ACCESS_KEY)")
	fl.StringVar(&cfg.SecretKey, "secret-key", "", "secret key (or env KELP_SECRET_KEY)")
	fl.StringVar(&cfg.Region, "region", "us-east-1", "region to sign requests for")
	fl.StringVar(&cfg.Bucket, "bucket", "kelp-benchmark", "bucket to write into (created when missing)")
	fl.StringVar(&cfg.Prefix, "prefix", "", "key prefix of the run's objects")
	fl.Var(&size, "size", "size of each object in bytes (suffixes KiB, MiB, GiB, k, M, G)")
	fl.IntVar(&cfg.Count, "count", 1000, "number of objects")
	fl.IntVar(&cfg.Concurrency, "concurrency", s3bench.DefaultConcurrency, "objects in flight")
	fl.Var(&part, "part-size", "objects above this size use multipart upload and ranged gets of this size")
	fl.IntVar(&cfg.PartConcurrency, "part-concurrency", s3bench.DefaultPartConcurrency, "parts or ranges of one large object in flight")
	fl.BoolVar(&cfg.SignPayload, "sign-payload", false, "sign bodies' SHA-256 instead of sending UNSIGNED-PAYLOAD")
	fl.BoolVar(&cfg.Checksums, "checksums", false, "let the SDK send and check CRC32 checksums (its default)")
	fl.BoolVar(&cfg.Cleanup, "cleanup", false, "delete the objects after the GET phase")
	fl.StringVar(&cfg.SSE, "sse", "", "server-side encryption of the objects: AES256 (SSE-S3), aws:kms (SSE-KMS, default key) or SSE-C (a random key per run)")
	fl.Uint64Var(&cfg.Seed, "seed", 0, "seed of contents and read order (0: random)")
	fl.BoolVar(&cfg.JSON, "json", false, `print {"put":{...},"get":{...}} as the last line`)
	fl.BoolVar(&cfg.Cold, "cold", false, coldUsage)
	return cmd
}

// byteSize is a flag value in bytes that accepts binary and decimal suffixes.
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }
func (b *byteSize) Type() string   { return "bytes" }

func (b *byteSize) Set(s string) error {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("not a size in bytes: %q", s)
	}
	*b = byteSize(n * mult)
	return nil
}
