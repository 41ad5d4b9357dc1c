// Package gate lets a store backend refuse calls after Close and make Close
// wait for the calls in flight. Shared by the backends under
// internal/filer/store; nothing else imports it.
package gate

import (
	"sync"

	"github.com/kelpfs/kelp/internal/filer/store"
)

// Gate counts calls in flight. The zero value is open.
type Gate struct {
	mu     sync.Mutex
	idle   sync.Cond
	active int
	closed bool
}

// Enter admits one call, or returns store.ErrClosed. Every successful
// Enter must be followed by one Leave.
func (g *Gate) Enter() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return store.ErrClosed
	}
	g.active++
	return nil
}

// Leave ends a call admitted by Enter.
func (g *Gate) Leave() {
	g.mu.Lock()
	g.active--
	if g.active == 0 && g.idle.L != nil {
		g.idle.Broadcast()
	}
	g.mu.Unlock()
}

// Close refuses new calls and waits until those in flight have left. It
// reports false if the gate was already closed, so that the caller releases
// its resources exactly once.
func (g *Gate) Close() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.closed = true
	g.idle.L = &g.mu
	for g.active > 0 {
		g.idle.Wait()
	}
	return true
}
