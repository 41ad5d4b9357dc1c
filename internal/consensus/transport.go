package consensus

import (
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"sync"
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
func listenTransport(cfg Config, log hclog.Logger) (*raft.NetworkTransport, *streamLayer, error) {
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.BindAddr); err != nil {
			return nil, nil, fmt.Errorf("consensus: listen %s: %w", cfg.BindAddr, err)
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
	stream := &streamLayer{Listener: ln, advertise: advertise, dial: dial, open: map[*servedConn]struct{}{}}
	return raft.NewNetworkTransportWithLogger(stream, 3, 10*time.Second, log), stream, nil
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

// streamLayer is raft's stream layer over one listener and a dialer. It
// keeps the connections it accepted so that drain can wait for raft's
// handlers of them to end.
type streamLayer struct {
	net.Listener
	advertise net.Addr
	dial      func(addr string, timeout time.Duration) (net.Conn, error)

	mu      sync.Mutex
	open    map[*servedConn]struct{}
	serving sync.WaitGroup
}

// Accept hands raft a connection whose Close is counted. raft's handler of a
// connection closes it when it returns, and only then.
func (s *streamLayer) Accept() (net.Conn, error) {
	c, err := s.Listener.Accept()
	if err != nil {
		return nil, err
	}
	sc := &servedConn{Conn: c, layer: s}
	s.mu.Lock()
	s.open[sc] = struct{}{}
	s.serving.Add(1)
	s.mu.Unlock()
	return sc, nil
}

// drain closes every accepted connection and waits until raft's handlers of
// them have returned. raft answers heartbeats on the connection's goroutine,
// outside the goroutines raft.Shutdown waits for, and such an answer may
// save a new term: the log store must not close under it (CI saw raft panic
// with "failed to save current term: database not open").
func (s *streamLayer) drain() {
	s.mu.Lock()
	for c := range s.open {
		c.Conn.Close()
	}
	s.mu.Unlock()
	s.serving.Wait()
}

// servedConn is an accepted connection that tells its layer when raft is
// done with it.
type servedConn struct {
	net.Conn
	layer *streamLayer
	once  sync.Once
}

func (c *servedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.layer.mu.Lock()
		delete(c.layer.open, c)
		c.layer.mu.Unlock()
		c.layer.serving.Done()
	})
	return err
}

func (s *streamLayer) Addr() net.Addr { return s.advertise }

func (s *streamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return s.dial(string(addr), timeout)
}

// tcpName is a TCP address spelled host:port, the host possibly a name.
type tcpName string

func (a tcpName) Network() string { return "tcp" }
func (a tcpName) String() string  { return string(a) }
