package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/kelpfs/kelp/internal/fsview"
	"github.com/kelpfs/kelp/internal/webdav"
)

// newWebDAVCommand is `kelp webdav`: a filer directory served over WebDAV.
func newWebDAVCommand(g *globalFlags) *cobra.Command {
	var vf viewFlags
	var addr addrFlags
	var port int
	var users string
	var mx metricsFlags
	cmd := &cobra.Command{
		Use:   "webdav",
		Short: "Serve a filer directory over WebDAV (RFC 4918 classes 1 and 2)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			grpcAddr, err := fsview.FilerGRPCAddr(vf.filer)
			if err != nil {
				return fmt.Errorf("--filer: %w", err)
			}
			bind, err := addr.bindIP()
			if err != nil {
				return err
			}
			tok, err := clientToken(vf.accessToken)
			if err != nil {
				return err
			}
			s, err := webdav.New(webdav.Config{IP: addr.ip, BindIP: bind, Port: port, Logger: log, UsersFile: users,
				View: fsview.Config{Filer: grpcAddr, Root: vf.filerPath, Collection: vf.collection, AccessToken: tok,
					Replication: vf.replication, ConnectTimeout: 10 * time.Second}, Metrics: mx.registry()})
			if err != nil {
				return err
			}
			stopMetrics, err := mx.start(bind, cmd.OutOrStdout())
			if err != nil {
				s.Close()
				return err
			}
			defer stopMetrics()
			fmt.Fprintf(cmd.OutOrStdout(), "webdav on %s for %s%s\n", s.URL(), vf.filer, vf.filerPath)
			ctx, stop := signalContext()
			defer stop()
			return s.Run(ctx)
		},
	}
	fl := cmd.Flags()
	vf.addFlags(fl)
	addr.addFlags(fl, "webdav")
	fl.IntVar(&port, "port", 7333, "WebDAV HTTP port")
	mx.addFlags(fl, 0)
	fl.StringVar(&users, "users", "", "basic auth: a file of name:bcrypt-hash lines (htpasswd -nbB); empty: no auth")
	return cmd
}
