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

// listenTransport binds raft's TCP transport on bindAddr. The other members
// dial this one at advertiseHost (a host name or IP, which they resolve on
// every dial) and the bound port; "" advertises the bound address itself.
//
// raft's own NewTCPTransport wants an IP to advertise, so a member bound to
// all interfaces under a name whose address may change (a container
// reconnected to its network) could not be built with it.
//
// With serverTLS set the listener serves TLS only, and with clientTLS set the
// members dial each other over TLS.
func listenTransport(bindAddr, advertiseHost string, serverTLS, clientTLS *tls.Config, log hclog.Logger) (*raft.NetworkTransport, error) {
	ln, err := net.Listen("tcp", bindAddr)
	if err != nil {
		return nil, fmt.Errorf("consensus: listen %s: %w", bindAddr, err)
	}
	var advertise net.Addr = ln.Addr()
	if serverTLS != nil {
		ln = tls.NewListener(ln, serverTLS)
	}
	if advertiseHost != "" {
		advertise = tcpName(net.JoinHostPort(advertiseHost, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)))
	}
	return raft.NewNetworkTransportWithLogger(&tcpStream{Listener: ln, advertise: advertise, tls: clientTLS}, 3, 10*time.Second, log), nil
}

// tcpStream is raft's stream layer over one TCP listener.
type tcpStream struct {
	net.Listener
	advertise net.Addr
	tls       *tls.Config // dial over TLS when set
}

func (s *tcpStream) Addr() net.Addr { return s.advertise }

func (s *tcpStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if s.tls != nil {
		return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(addr), s.tls)
	}
	return net.DialTimeout("tcp", string(addr), timeout)
}

// tcpName is a TCP address spelled host:port, the host possibly a name.
type tcpName string

func (a tcpName) Network() string { return "tcp" }
func (a tcpName) String() string  { return string(a) }
