package cli

import (
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/master"
	"github.com/kelpfs/kelp/internal/s3"
	"github.com/kelpfs/kelp/internal/volumeserver"
)

// advertisedName never resolves (.invalid is reserved): a server that looked
// it up to bind its listeners could not start.
const advertisedName = "kelp-advertised.invalid"

// startFunc starts one kind of server from its command line flags and
// returns the HTTP address it advertises.
type startFunc func(t *testing.T, args []string) (advertised string, err error)

func parseFlags(t *testing.T, args []string, register func(*pflag.FlagSet)) {
	t.Helper()
	fl := pflag.NewFlagSet("t", pflag.ContinueOnError)
	register(fl)
	if err := fl.Parse(args); err != nil {
		t.Fatal(err)
	}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func startMaster(t *testing.T, args []string) (string, error) {
	f := &masterFlags{mdir: t.TempDir()}
	parseFlags(t, append(args, "--port=0"), func(fl *pflag.FlagSet) { f.addr.addFlags(fl, "master"); f.addFlags(fl, "") })
	cfg, err := f.config(quiet)
	if err != nil {
		return "", err
	}
	m, err := master.New(cfg)
	if err != nil {
		return "", err
	}
	t.Cleanup(func() { m.Close() })
	return m.HTTPAddr(), nil
}

func startVolume(t *testing.T, args []string) (string, error) {
	f := &volumeFlags{dirs: t.TempDir()}
	parseFlags(t, append(args, "--port=0"), func(fl *pflag.FlagSet) { f.addr.addFlags(fl, "volume server"); f.addFlags(fl, "") })
	cfg, err := f.config(quiet)
	if err != nil {
		return "", err
	}
	v, err := volumeserver.New(cfg)
	if err != nil {
		return "", err
	}
	t.Cleanup(func() { v.Close() })
	return v.URL(), nil
}

func startFiler(t *testing.T, args []string) (string, error) {
	fs, err := newTestFiler(t, args)
	if err != nil {
		return "", err
	}
	return fs.Addr(), nil
}

func newTestFiler(t *testing.T, args []string) (*filerserver.Server, error) {
	f := &filerFlags{dir: t.TempDir(), masters: "127.0.0.1:9"}
	parseFlags(t, append(args, "--port=0"), func(fl *pflag.FlagSet) { f.addr.addFlags(fl, "filer"); f.addFlags(fl, "") })
	cfg, err := f.config(quiet)
	if err != nil {
		return nil, err
	}
	fs, err := filerserver.New(cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { fs.Close() })
	return fs, nil
}

func startS3(t *testing.T, args []string) (string, error) {
	fs, err := newTestFiler(t, []string{"--ip=127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	f := &s3Flags{}
	parseFlags(t, append(args, "--port=0", "--access-key=AK", "--secret-key=SK"), func(fl *pflag.FlagSet) { f.addr.addFlags(fl, "gateway"); f.addFlags(fl, "") })
	cfg, err := f.config(quiet, fs.Filer(), "", io.Discard)
	if err != nil {
		return "", err
	}
	gw, err := s3.New(cfg)
	if err != nil {
		return "", err
	}
	t.Cleanup(func() { gw.Close() })
	return gw.Addr(), nil
}

// reachable reports whether something accepts TCP connections on ip:port.
func reachable(ip, port string) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, port), 2*time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// TestServersAdvertiseTheNameAndBindWhereAsked: --ip is advertised as given
// and never resolved by the server; --ip.bind is where the listeners are
// (127.0.0.1 only: 127.0.0.2, another loopback address, gets no answer);
// without --ip.bind a named server listens on every interface, so that a new
// address behind its name (a reconnected container) still reaches it.
func TestServersAdvertiseTheNameAndBindWhereAsked(t *testing.T) {
	servers := map[string]startFunc{"master": startMaster, "volume": startVolume, "filer": startFiler, "s3": startS3}
	for name, start := range servers {
		t.Run(name, func(t *testing.T) {
			addr, err := start(t, []string{"--ip=" + advertisedName, "--ip.bind=127.0.0.1"})
			if err != nil {
				t.Fatalf("--ip=%s --ip.bind=127.0.0.1: %v", advertisedName, err)
			}
			host, port, _ := net.SplitHostPort(addr)
			if host != advertisedName {
				t.Errorf("advertises %s, want host %s", addr, advertisedName)
			}
			if !reachable("127.0.0.1", port) {
				t.Errorf("nothing listens on 127.0.0.1:%s", port)
			}
			if reachable("127.0.0.2", port) {
				t.Errorf("listens on 127.0.0.2:%s although --ip.bind=127.0.0.1", port)
			}

			addr, err = start(t, []string{"--ip=" + advertisedName})
			if err != nil {
				t.Fatalf("--ip=%s: %v", advertisedName, err)
			}
			host, port, _ = net.SplitHostPort(addr)
			if host != advertisedName || !reachable("127.0.0.2", port) {
				t.Errorf("--ip=<name> alone: advertises %s, reachable on 127.0.0.2:%s: %v; want the name, listening on every interface", addr, port, reachable("127.0.0.2", port))
			}

			// An IP literal is bound as it is: loopback stays loopback.
			addr, err = start(t, []string{"--ip=127.0.0.1"})
			if err != nil {
				t.Fatal(err)
			}
			_, port, _ = net.SplitHostPort(addr)
			if reachable("127.0.0.2", port) {
				t.Errorf("--ip=127.0.0.1 listens beyond 127.0.0.1 (port %s)", port)
			}
		})
	}
}

func TestAddressFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		f    addrFlags
		want string
	}{
		{addrFlags{ip: "0.0.0.0"}, "--ip.bind=0.0.0.0"},
		{addrFlags{ip: "::"}, "not an address others can dial"},
		{addrFlags{ip: ""}, "--ip is empty"},
		{addrFlags{ip: "v1", bind: "v1"}, "not an IP address"},
	} {
		if _, err := tc.f.bindIP(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want %q", tc.f, err, tc.want)
		}
	}
}
