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
	"github.com/kelpfs/kelp/internal/security"
	"github.com/kelpfs/kelp/internal/volumeserver"
	"github.com/kelpfs/kelp/internal/webdav"
)

// newServerCommand is `kelp server`: a whole cluster in one process (master,
// volume server, filer, S3 gateway), on one directory.
func newServerCommand(g *globalFlags) *cobra.Command {
	var dir string
	var addr addrFlags
	mf := &masterFlags{}
	uf := &adminFlags{}
	vf := &volumeFlags{}
	ff := &filerFlags{}
	sf := &s3Flags{}
	af := &authFlags{}
	var webdavPort int
	var webdavUsers string
	var mx metricsFlags
	var secure bool
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a master, a volume server, a filer, the S3 gateway and WebDAV in one process (a one-machine cluster)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			var tlsFiles *security.Secure
			if secure && !g.security.tls.Enabled() {
				if tlsFiles, err = secureFiles(dir, addr.ip); err != nil {
					return err
				}
				g.security.tls = tlsFiles.Files
				if err := g.security.load(); err != nil {
					return err
				}
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
			if tlsFiles != nil {
				fmt.Fprintf(out, "  TLS everywhere: CA %s, certificate %s, key %s\n", tlsFiles.Files.CA, tlsFiles.Files.Cert, tlsFiles.Files.Key)
				fmt.Fprintf(out, "  tools (shell, mount, benchmark) use them with --%s=%s\n", security.ConfigFlag, tlsFiles.Config)
			}
			if secure { // the authentication half of --secure: signing key, access tokens
				if err := af.applySecure(dir, out); err != nil {
					return err
				}
			}
			sec, err := af.setup()
			if err != nil {
				return err
			}
			sec.applyMaster(&mcfg)
			reg := mx.registry()
			mcfg.Metrics = reg
			var filerAddr string // set once the filer exists, before anything is served
			uf.filerAddr = func() string { return filerAddr }
			uf.filerToken = sec.internalToken("kelp-server-adminui")
			if err := uf.mountAdminUI(&mcfg, log, dir, out); err != nil { // prints generated credentials
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
			vcfg.Signer, vcfg.ReadSigner, vcfg.Access, vcfg.Audit = sec.signer, sec.readSigner, sec.access, sec.audit
			vcfg.Metrics = reg
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
			fcfg.Signer, fcfg.ReadSigner, fcfg.Access, fcfg.Audit = sec.signer, sec.readSigner, sec.access, sec.audit
			if sec.signer == nil {
				// Access tokens without signed file ids: the filer shows
				// the master a token of its own for its assigns.
				fcfg.AccessToken = sec.internalToken("kelp-server-filer")
			}
			fcfg.Metrics = reg
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
			scfg.Audit = sec.audit
			scfg.Metrics = reg
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
					View: fsview.Config{Filer: f.GRPCAddr(), ConnectTimeout: time.Minute, AccessToken: sec.internalToken("kelp-server-webdav")}, Metrics: reg})
				if err != nil {
					return fail(err)
				}
				started = append(started, dav)
			}
			fmt.Fprintf(out, "  master  %s\n", security.URL(m.HTTPAddr())+" (admin UI at /)")
			fmt.Fprintf(out, "  volume  %s\n", security.URL(v.URL()))
			fmt.Fprintf(out, "  filer   %s\n", security.URL(f.Addr()))
			fmt.Fprintf(out, "  s3      %s\n", gw.URL())
			if dav != nil {
				fmt.Fprintf(out, "  webdav  %s\n", dav.URL())
			}
			bind, err := addr.bindIP()
			if err != nil {
				return fail(err)
			}
			stopMetrics, err := mx.start(bind, out)
			if err != nil {
				return fail(err)
			}
			defer stopMetrics()
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
	uf.addFlags(fl)
	vf.addFlags(fl, "volume.")
	ff.addFlags(fl, "filer.")
	sf.addFlags(fl, "s3.")
	af.addFlags(fl, true, true)
	fl.IntVar(&webdavPort, "webdav.port", 7333, "WebDAV port (0: no WebDAV server)")
	mx.addFlags(fl, 9324)
	fl.StringVar(&webdavUsers, "webdav.users", "", "WebDAV basic auth: a file of name:bcrypt-hash lines (htpasswd -nbB); empty: no auth")
	fl.BoolVar(&secure, "secure", false, "TLS on every port: on first start generate a CA, a certificate and its key in DIR/security (reused after) unless --tls.cert/--tls.key are given; see docs/security.md")
	return cmd
}

// secureFiles returns the TLS material of `kelp server --secure` in
// dir/security, generated on first start: the certificate names ip, this
// machine's host name and the loopback addresses.
func secureFiles(dir, ip string) (*security.Secure, error) {
	hosts := []string{ip}
	if h, err := os.Hostname(); err == nil {
		hosts = append(hosts, h)
	}
	sec, err := security.EnsureSecure(filepath.Join(dir, "security"), hosts)
	if err != nil {
		return nil, fmt.Errorf("--secure: %w", err)
	}
	return sec, nil
}
