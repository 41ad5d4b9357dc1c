// Package bridge is a TCP proxy that tests put between a client and a server
// of an in-process cluster to inject network faults fast and on cue: Pause
// holds all traffic (as a stopped process or a congested link does), Blackhole
// swallows it (a partition that drops packets), Drop cuts every open
// connection (a crash or reset) and Resume lets traffic flow again.
//
// A Bridge listens on a port the kernel picks (127.0.0.1:0) and forwards each
// connection to its target, so a test hands Addr to clients instead of the
// server's own address. Only tests import it.
package bridge

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is what a bridge does with traffic.
type Mode int

const (
	// Forward passes bytes both ways.
	Forward Mode = iota
	// Paused holds bytes (and new connections' dials) until the mode
	// changes; nothing is lost.
	Paused
	// Blackholed reads bytes and throws them away; connections stay open.
	Blackholed
)

func (m Mode) String() string {
	switch m {
	case Forward:
		return "forward"
	case Paused:
		return "paused"
	case Blackholed:
		return "blackholed"
	}
	return "unknown"
}

// Bridge is a fault-injecting TCP proxy in front of one target address.
type Bridge struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	mode    Mode
	changed chan struct{} // closed and replaced when mode changes or the bridge closes
	links   map[*link]struct{}
	closed  bool
	wg      sync.WaitGroup

	accepted atomic.Int64
}

// New starts a bridge on 127.0.0.1:0 that forwards to target (host:port).
func New(target string) (*Bridge, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Bridge{ln: ln, target: target, changed: make(chan struct{}), links: map[*link]struct{}{}}
	b.wg.Add(1)
	go b.serve()
	return b, nil
}

// Addr is the host:port clients connect to instead of the target.
func (b *Bridge) Addr() string { return b.ln.Addr().String() }

// Target is the address the bridge forwards to.
func (b *Bridge) Target() string { return b.target }

// Mode is the current mode.
func (b *Bridge) Mode() Mode {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mode
}

// Accepted counts the connections accepted so far.
func (b *Bridge) Accepted() int64 { return b.accepted.Load() }

// Conns is the number of connections open through the bridge now.
func (b *Bridge) Conns() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.links)
}

// Pause holds all traffic, both ways, on open and new connections until
// Resume (or Blackhole); bytes held are delivered afterwards.
func (b *Bridge) Pause() { b.setMode(Paused) }

// Blackhole accepts connections and reads their bytes but forwards nothing,
// until Resume. Bytes read meanwhile are lost, so a stream that carried some
// is garbled: clients see timeouts, then errors.
func (b *Bridge) Blackhole() { b.setMode(Blackholed) }

// Resume forwards traffic again.
func (b *Bridge) Resume() { b.setMode(Forward) }

// Drop closes every open connection, both sides, at once. The mode is
// unchanged: new connections are handled as before.
func (b *Bridge) Drop() {
	b.mu.Lock()
	links := make([]*link, 0, len(b.links))
	for l := range b.links {
		links = append(links, l)
	}
	b.mu.Unlock()
	for _, l := range links {
		l.close()
	}
}

// Close stops listening, cuts every connection and waits for the bridge's
// goroutines to end.
func (b *Bridge) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
	err := b.ln.Close()
	b.Drop()
	b.wg.Wait()
	return err
}

func (b *Bridge) setMode(m Mode) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mode == m || b.closed {
		return
	}
	b.mode = m
	close(b.changed)
	b.changed = make(chan struct{})
}

// gate waits while the bridge is paused and returns the mode that ends the
// wait; ok is false when l was closed meanwhile.
func (b *Bridge) gate(l *link) (m Mode, ok bool) {
	for {
		b.mu.Lock()
		m, ch, closed := b.mode, b.changed, b.closed
		b.mu.Unlock()
		if closed {
			return m, false
		}
		if m != Paused {
			return m, true
		}
		select {
		case <-ch:
		case <-l.done:
			return m, false
		}
	}
}

func (b *Bridge) serve() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		b.accepted.Add(1)
		l := &link{client: c, done: make(chan struct{})}
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			c.Close()
			return
		}
		b.links[l] = struct{}{}
		b.wg.Add(1)
		b.mu.Unlock()
		go b.run(l)
	}
}

// run dials the target (once the bridge is not paused) and copies both ways.
func (b *Bridge) run(l *link) {
	defer b.wg.Done()
	defer func() {
		l.close()
		b.mu.Lock()
		delete(b.links, l)
		b.mu.Unlock()
	}()
	if _, ok := b.gate(l); !ok {
		return
	}
	up, err := net.DialTimeout("tcp", b.target, 5*time.Second)
	if err != nil {
		return
	}
	if !l.setUpstream(up) {
		up.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); b.copy(l, up, l.client) }()
	go func() { defer wg.Done(); b.copy(l, l.client, up) }()
	wg.Wait()
}

// copy moves bytes from src to dst through the gate until either side
// fails; then it closes the link, so the other direction ends too.
func (b *Bridge) copy(l *link, dst io.Writer, src io.Reader) {
	defer l.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			m, ok := b.gate(l)
			if !ok {
				return
			}
			if m == Forward {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// link is one client connection and its upstream.
type link struct {
	client net.Conn

	mu     sync.Mutex
	up     net.Conn
	closed bool
	done   chan struct{}
}

func (l *link) setUpstream(up net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.up = up
	return true
}

func (l *link) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	close(l.done)
	l.client.Close()
	if l.up != nil {
		l.up.Close()
	}
}
