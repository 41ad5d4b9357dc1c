// Package netcut is a network between the members of an in-process test
// cluster that tests can cut: a member's dials to another fail and the
// connections already open between them are closed, both ways, as a
// partition does. Members dial each other through Network.Dialer (the Raft
// transport's Config.Dial), so it sees every connection. Only tests import it.
package netcut

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// Network connects members and cuts links between them on cue.
type Network struct {
	mu    sync.Mutex
	addr  map[string]string            // member address -> member id
	cut   map[[2]string]bool           // member ids, in order
	conns map[[2]string]map[*conn]bool // open connections per link
}

// New is a network with every link up.
func New() *Network {
	return &Network{addr: map[string]string{}, cut: map[[2]string]bool{}, conns: map[[2]string]map[*conn]bool{}}
}

func link(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

// ErrCut is a dial over a cut link.
var ErrCut = errors.New("netcut: link cut")

// Add names the member listening at addr.
func (n *Network) Add(id, addr string) {
	n.mu.Lock()
	n.addr[addr] = id
	n.mu.Unlock()
}

// Dialer is member from's dial function.
func (n *Network) Dialer(from string) func(addr string, timeout time.Duration) (net.Conn, error) {
	return func(addr string, timeout time.Duration) (net.Conn, error) {
		n.mu.Lock()
		l := link(from, n.addr[addr])
		cut := n.cut[l]
		n.mu.Unlock()
		if cut {
			return nil, ErrCut
		}
		c, err := net.DialTimeout("tcp", addr, timeout)
		if err != nil {
			return nil, err
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.cut[l] { // cut while dialing
			c.Close()
			return nil, ErrCut
		}
		tc := &conn{Conn: c, n: n, l: l}
		if n.conns[l] == nil {
			n.conns[l] = map[*conn]bool{}
		}
		n.conns[l][tc] = true
		return tc, nil
	}
}

// conn is a connection the network tracks until it is closed, so that a
// long test's many short connections do not pile up.
type conn struct {
	net.Conn
	n *Network
	l [2]string
}

func (c *conn) Close() error {
	c.n.mu.Lock()
	delete(c.n.conns[c.l], c)
	c.n.mu.Unlock()
	return c.Conn.Close()
}

// ContextDialer is member from's dial function in the form of
// net.Dialer.DialContext (an http.Transport's, a gRPC dialer's): at most 2 s
// per dial, less when ctx ends sooner.
func (n *Network) ContextDialer(from string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	dial := n.Dialer(from)
	return func(ctx context.Context, _, addr string) (net.Conn, error) {
		timeout := 2 * time.Second
		if d, ok := ctx.Deadline(); ok {
			timeout = min(timeout, time.Until(d))
		}
		return dial(addr, timeout)
	}
}

// Isolate cuts member id off from every other member.
func (n *Network) Isolate(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, other := range n.addr {
		if other == id {
			continue
		}
		l := link(id, other)
		n.cut[l] = true
		for c := range n.conns[l] {
			c.Conn.Close() // not c.Close: n.mu is held
		}
		delete(n.conns, l)
	}
}

// Heal restores every link.
func (n *Network) Heal() {
	n.mu.Lock()
	n.cut = map[[2]string]bool{}
	n.mu.Unlock()
}
