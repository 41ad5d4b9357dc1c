package consensus

import (
	"errors"
	"net"
	"sync"
	"time"
)

// network connects the members of a test group and can cut the links
// between any two of them, both ways, on cue: dials between them fail and
// the connections already open are closed, as a partition does. Every
// Raft connection is dialed through it, so it sees them all.
type network struct {
	mu    sync.Mutex
	addr  map[string]string        // member address -> member id
	cut   map[[2]string]bool       // member ids, in order
	conns map[[2]string][]net.Conn // open connections per link
}

func newNetwork() *network {
	return &network{addr: map[string]string{}, cut: map[[2]string]bool{}, conns: map[[2]string][]net.Conn{}}
}

func link(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

var errCut = errors.New("network: link cut")

// add names the member listening at addr.
func (n *network) add(id, addr string) {
	n.mu.Lock()
	n.addr[addr] = id
	n.mu.Unlock()
}

// dialer is member from's Config.Dial.
func (n *network) dialer(from string) func(addr string, timeout time.Duration) (net.Conn, error) {
	return func(addr string, timeout time.Duration) (net.Conn, error) {
		n.mu.Lock()
		l := link(from, n.addr[addr])
		cut := n.cut[l]
		n.mu.Unlock()
		if cut {
			return nil, errCut
		}
		c, err := net.DialTimeout("tcp", addr, timeout)
		if err != nil {
			return nil, err
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.cut[l] { // cut while dialing
			c.Close()
			return nil, errCut
		}
		n.conns[l] = append(n.conns[l], c)
		return c, nil
	}
}

// isolate cuts member id off from every other member.
func (n *network) isolate(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, other := range n.addr {
		if other == id {
			continue
		}
		l := link(id, other)
		n.cut[l] = true
		for _, c := range n.conns[l] {
			c.Close()
		}
		delete(n.conns, l)
	}
}

// heal restores every link.
func (n *network) heal() {
	n.mu.Lock()
	n.cut = map[[2]string]bool{}
	n.mu.Unlock()
}
