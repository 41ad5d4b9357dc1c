// Package cli is the kelp command line: one file per sub-command, each turning its
// flags into a service Config and running the service until a signal arrives.
//
// It is the top of the import graph: nothing imports it but cmd/kelp. All wiring
// between services is explicit here; no service reads flags or globals.
package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Main runs the command line and returns the process exit code.
func Main(args []string) int {
	root := newRootCommand()
	root.SetArgs(helperArgs(args)[1:])
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "kelp:", err)
		return 1
	}
	return 0
}

// globalFlags are shared by every sub-command.
type globalFlags struct {
	logLevel   string
	cpuProfile string
	stopCPU    func()
	security   securityFlags
}

func newRootCommand() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:           "kelp",
		Short:         "Kelp: a distributed object and file store",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	root.PersistentFlags().StringVar(&g.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the whole run to this file (for go tool pprof)")
	g.security.addFlags(root.PersistentFlags())
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := g.security.apply(cmd); err != nil {
			return err
		}
		return g.startProfile()
	}
	root.PersistentPostRun = func(*cobra.Command, []string) { g.stopProfile() }
	root.AddCommand(
		newServerCommand(g),
		newMasterCommand(g),
		newVolumeCommand(g),
		newFilerCommand(g),
		newS3Command(g),
		newKMSCommand(),
		newMountCommand(g),
		newWebDAVCommand(g),
		newCSICommand(g),
		newFilerSyncCommand(g),
		newFilerBackupCommand(g),
		newFilerRestoreCommand(g),
		newBenchmarkCommand(g),
		newShellCommand(g),
		newHealthCommand(),
		newCertsCommand(),
		newVersionCommand(),
	)
	return root
}

// startProfile starts the CPU profile asked for with --cpuprofile.
func (g *globalFlags) startProfile() error {
	if g.cpuProfile == "" {
		return nil
	}
	f, err := os.Create(g.cpuProfile)
	if err != nil {
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	g.stopCPU = func() {
		pprof.StopCPUProfile()
		f.Close()
	}
	return nil
}

func (g *globalFlags) stopProfile() {
	if g.stopCPU != nil {
		g.stopCPU()
		g.stopCPU = nil
	}
}

func (g *globalFlags) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})), nil
}

// signalContext is cancelled by SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// runnable is what every service offers to the command line.
type runnable interface {
	Run(ctx context.Context) error
}

// service is a runnable that can be closed before it ran.
type service interface {
	runnable
	Close() error
}

// runAll runs services until ctx ends or one of them fails, then stops the rest.
func runAll(ctx context.Context, services ...runnable) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(services))
	for _, s := range services {
		go func() { errc <- s.Run(ctx) }()
	}
	var first error
	for range services {
		err := <-errc
		if err != nil && !errors.Is(err, context.Canceled) && first == nil {
			first = err
		}
		cancel()
	}
	return first
}
