package consensus

import (
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// listenTransport binds raft's TCP transport on cfg.BindAddr (or serves on
// cfg.Listener). The other members dial this one at cfg.AdvertiseHost (a
// host name or IP, which they resolve on every dial) and the bound port; ""
// advertises the bound address itself.
//
// raft's own NewTCPTransport wants an IP to advertise, so a member bound to
// all interfaces under a name whose address may change (a container
// reconnected to its network) could not be built with it.
//
// With ServerTLS set the listener serves TLS only, and with ClientTLS set the
// members dial each other over TLS.
func listenTransport(cfg Config, log hclog.Logger) (*raft.NetworkTransport, error) {
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.BindAddr); err != nil {
			return nil, fmt.Errorf("consensus: listen %s: %w", cfg.BindAddr, err)
		}
	}
	var advertise net.Addr = ln.Addr()
	if cfg.ServerTLS != nil {
		ln = tls.NewListener(ln, cfg.ServerTLS)
	}
	if cfg.AdvertiseHost != "" {
		advertise = tcpName(net.JoinHostPort(cfg.AdvertiseHost, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)))
	}
	dial := cfg.Dial
	if dial == nil {
		dial = tcpDialer(cfg.ClientTLS)
	}
	return raft.NewNetworkTransportWithLogger(&streamLayer{Listener: ln, advertise: advertise, dial: dial}, 3, 10*time.Second, log), nil
}

// tcpDialer dials over TCP, and TLS when tlsConf is set.
func tcpDialer(tlsConf *tls.Config) func(addr string, timeout time.Duration) (net.Conn, error) {
	return func(addr string, timeout time.Duration) (net.Conn, error) {
		if tlsConf != nil {
			return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", addr, tlsConf)
		}
		return net.DialTimeout("tcp", addr, timeout)
	}
}

// streamLayer is raft's stream layer over one listener and a dialer.
type streamLayer struct {
	net.Listener
	advertise net.Addr
	dial      func(addr string, timeout time.Duration) (net.Conn, error)
}

func (s *streamLayer) Addr() net.Addr { return s.advertise }

func (s *streamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return s.dial(string(addr), timeout)
}

// tcpName is a TCP address spelled host:port, the host possibly a name.
type tcpName string

func (a tcpName) Network() string { return "tcp" }
func (a tcpName) String() string  { return string(a) }
