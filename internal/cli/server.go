package cli

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/fsview"
	"github.com/kelpfs/kelp/internal/master"
	"github.com/kelpfs/kelp/internal/s3"
	"github.com/kelpfs/kelp/internal/volumeserver"
	"github.com/kelpfs/kelp/internal/webdav"
)

// newServerCommand is `kelp server`: a whole cluster in one process (master,
// volume server, filer, S3 gateway), on one directory.
func newServerCommand(g *globalFlags) *cobra.Command {
	var dir string
	var addr addrFlags
	mf := &masterFlags{}
	af := &adminFlags{}
	vf := &volumeFlags{}
	ff := &filerFlags{}
	sf := &s3Flags{}
	var webdavPort int
	var webdavUsers string
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a master, a volume server, a filer, the S3 gateway and WebDAV in one process (a one-machine cluster)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			mf.addr, vf.addr, ff.addr, sf.addr = addr, addr, addr, addr
			mf.mdir = filepath.Join(dir, "master")
			vf.dirs = filepath.Join(dir, "volumes")
			ff.dir = filepath.Join(dir, "filer")
			vf.masters = net.JoinHostPort(addr.ip, strconv.Itoa(mf.port))
			ff.masters = vf.masters
			for _, d := range []string{mf.mdir, vf.dirs, ff.dir} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					return err
				}
			}
			// Start in dependency order; on failure close what already started.
			var started []service
			fail := func(err error) error {
				for i := len(started) - 1; i >= 0; i-- {
					started[i].Close()
				}
				return err
			}
			mcfg, err := mf.config(log)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "kelp server: data in %s\n", dir)
			var filerAddr string // set once the filer exists, before anything is served
			af.filerAddr = func() string { return filerAddr }
			if err := af.mountAdminUI(&mcfg, log, dir, out); err != nil { // prints generated credentials
				return err
			}
			m, err := master.New(mcfg)
			if err != nil {
				return err
			}
			started = append(started, m)
			vcfg, err := vf.config(log)
			if err != nil {
				return fail(err)
			}
			v, err := volumeserver.New(vcfg)
			if err != nil {
				return fail(err)
			}
			started = append(started, v)
			fcfg, err := ff.config(log)
			if err != nil {
				return fail(err)
			}
			// The filer (and the S3 gateway on it) reaches this process's
			// volume server without going through the network stack.
			fcfg.HTTPClient = &http.Client{Transport: &client.Loopback{
				Handlers: map[string]http.Handler{v.URL(): v.Handler(), v.PublicURL(): v.Handler()},
				Next:     client.NewHTTPClient().Transport,
			}}
			f, err := filerserver.New(fcfg)
			if err != nil {
				return fail(err)
			}
			started = append(started, f)
			filerAddr = f.Addr()
			scfg, err := sf.config(log, f.Filer(), dir, out) // prints generated credentials
			if err != nil {
				return fail(err)
			}
			gw, err := s3.New(scfg)
			if err != nil {
				return fail(err)
			}
			started = append(started, gw)
			var dav *webdav.Server
			if webdavPort != 0 {
				bind, err := addr.bindIP()
				if err != nil {
					return fail(err)
				}
				// WebDAV reaches the filer over its gRPC API like any
				// gateway; Run waits for the filer to serve.
				dav, err = webdav.New(webdav.Config{IP: addr.ip, BindIP: bind, Port: webdavPort, Logger: log, UsersFile: webdavUsers,
					View: fsview.Config{Filer: f.GRPCAddr(), ConnectTimeout: time.Minute}})
				if err != nil {
					return fail(err)
				}
				started = append(started, dav)
			}
			fmt.Fprintf(out, "  master  http://%s (admin UI at /)\n", m.HTTPAddr())
			fmt.Fprintf(out, "  volume  http://%s\n", v.URL())
			fmt.Fprintf(out, "  filer   http://%s\n", f.Addr())
			fmt.Fprintf(out, "  s3      %s\n", gw.URL())
			if dav != nil {
				fmt.Fprintf(out, "  webdav  %s\n", dav.URL())
			}
			services := make([]runnable, len(started))
			for i, s := range started {
				services[i] = s
			}
			ctx, stop := signalContext()
			defer stop()
			err = runAll(ctx, services...)
			fail(nil) // every Close is idempotent; this covers services whose Run does not close
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&dir, "dir", "./data", "directory for all of this server's data")
	addr.addFlags(fl, "server")
	mf.addFlags(fl, "master.")
	af.addFlags(fl)
	vf.addFlags(fl, "volume.")
	ff.addFlags(fl, "filer.")
	sf.addFlags(fl, "s3.")
	fl.IntVar(&webdavPort, "webdav.port", 7333, "WebDAV port (0: no WebDAV server)")
	fl.StringVar(&webdavUsers, "webdav.users", "", "WebDAV basic auth: a file of name:bcrypt-hash lines (htpasswd -nbB); empty: no auth")
	return cmd
}
