package cli

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/master"
	"github.com/kelpfs/kelp/internal/s3"
	"github.com/kelpfs/kelp/internal/volumeserver"
)

// newServerCommand is `kelp server`: a whole cluster in one process (master,
// volume server, filer), on one directory.
func newServerCommand(g *globalFlags) *cobra.Command {
	var dir, ip string
	mf := &masterFlags{}
	vf := &volumeFlags{}
	ff := &filerFlags{}
	sf := &s3Flags{}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a master and a volume server in one process (a one-machine cluster)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			mf.ip, vf.ip, ff.ip, sf.ip = ip, ip, ip, ip
			mf.mdir = filepath.Join(dir, "master")
			vf.dirs = filepath.Join(dir, "volumes")
			ff.dir = filepath.Join(dir, "filer")
			vf.masters = net.JoinHostPort(ip, strconv.Itoa(mf.port))
			ff.masters = vf.masters
			for _, d := range []string{mf.mdir, vf.dirs, ff.dir} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					return err
				}
			}
			m, err := master.New(mf.config(log))
			if err != nil {
				return err
			}
			vcfg, err := vf.config(log)
			if err != nil {
				m.Close()
				return err
			}
			v, err := volumeserver.New(vcfg)
			if err != nil {
				m.Close()
				return err
			}
			fcfg, err := ff.config(log)
			if err != nil {
				v.Close()
				m.Close()
				return err
			}
			f, err := filerserver.New(fcfg)
			if err != nil {
				v.Close()
				m.Close()
				return err
			}
			services := []runnable{m, v, f}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "kelp server: data in %s\n", dir)
			scfg, err := sf.config(log, f.Filer(), dir, out)
			if err == nil {
				var gw *s3.Server
				if gw, err = s3.New(scfg); err == nil {
					defer gw.Close()
					fmt.Fprintf(out, "  s3      %s\n", gw.URL())
					services = append(services, gw)
				}
			}
			if err != nil {
				f.Close()
				v.Close()
				m.Close()
				return err
			}
			fmt.Fprintf(out, "  master  http://%s\n", m.HTTPAddr())
			fmt.Fprintf(out, "  volume  http://%s\n", v.URL())
			fmt.Fprintf(out, "  filer   http://%s\n", f.Addr())
			ctx, stop := signalContext()
			defer stop()
			return runAll(ctx, services...)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&dir, "dir", "./data", "directory for all of this server's data")
	fl.StringVar(&ip, "ip", "127.0.0.1", "address to listen on and to advertise")
	mf.addFlags(fl, "master.")
	vf.addFlags(fl, "volume.")
	ff.addFlags(fl, "filer.")
	sf.addFlags(fl, "s3.")
	return cmd
}
