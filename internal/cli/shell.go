package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"google.golang.org/grpc"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/security"
	"github.com/kelpfs/kelp/internal/shell"
)

func newShellCommand(g *globalFlags) *cobra.Command {
	var masters, commands, accessToken string
	cmd := &cobra.Command{
		Use:   "shell",
		Short: "Administer a cluster: admin lock, settings, volume placement, repair and balance",
		Long: `kelp shell runs admin commands against a cluster. It is interactive (line
editing, history in ~/.kelp_shell_history) when stdin is a terminal; otherwise
it runs the commands read from stdin, or those given with -c "cmd; cmd", stops
at the first that fails and exits non-zero. Type help for the commands.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			tok, err := clientToken(accessToken)
			if err != nil {
				return err
			}
			cfg := shell.Config{
				Masters:  splitList(masters),
				Out:      cmd.OutOrStdout(),
				Err:      cmd.ErrOrStderr(),
				Owner:    shellOwner(),
				Terminal: term.IsTerminal(int(os.Stderr.Fd())),
				Logger:   log,
			}
			if tok != "" {
				cfg.DialOptions = []grpc.DialOption{auth.DialOption(auth.Static(tok))}
				// Volume servers take the admin token the masters sign for
				// this token: they need no copy of the masters' tokens file.
				var hosts []string
				for _, m := range cfg.Masters {
					if h, err := shell.MasterHTTP(m); err == nil {
						hosts = append(hosts, h)
					}
				}
				cfg.VolumeDialOptions = []grpc.DialOption{auth.DialOption(auth.Vouched(hosts, security.URL, tok, client.NewHTTPClient()))}
			}
			interactive := !cmd.Flags().Changed("command") && term.IsTerminal(int(os.Stdin.Fd()))
			if home, err := os.UserHomeDir(); err == nil && interactive {
				cfg.HistoryFile = filepath.Join(home, ".kelp_shell_history")
			}
			sh, err := shell.New(cfg)
			if err != nil {
				return err
			}
			defer sh.Close()
			if interactive {
				// Ctrl-C interrupts the running command, not the shell.
				return sh.RunInteractive(context.Background(), func(parent context.Context) (context.Context, context.CancelFunc) {
					return signal.NotifyContext(parent, os.Interrupt)
				})
			}
			ctx, stop := signalContext()
			defer stop()
			if cmd.Flags().Changed("command") {
				return sh.RunScript(ctx, strings.NewReader(commands))
			}
			return sh.RunScript(ctx, cmd.InOrStdin())
		},
	}
	cmd.Flags().StringVar(&masters, "master", "127.0.0.1:9333", "master addresses host:port[,host:port...] (gRPC at port+10000, or host:port.grpcPort)")
	addAccessTokenFlag(cmd.Flags(), &accessToken)
	cmd.Flags().StringVarP(&commands, "command", "c", "", `commands to run, separated by ";", instead of reading them`)
	return cmd
}

// shellOwner names this shell in the admin lock, so an operator who finds
// the lock taken knows whom to ask.
func shellOwner() string {
	host, _ := os.Hostname()
	user := os.Getenv("USER")
	return fmt.Sprintf("shell %s@%s pid %d", user, host, os.Getpid())
}
