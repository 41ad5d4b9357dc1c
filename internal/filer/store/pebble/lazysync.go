package pebble

import (
	"context"
	"sync"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"
)

// defaultDeferredSyncDelay is how long a deferred Update's batch may wait
// for its WAL sync when nobody asks for it sooner. A crash of the filer
// loses at most that much of the deferred commits nobody fsync'ed: a local
// file system keeps unsynced writes for seconds (ext4 commits every 5 s).
const defaultDeferredSyncDelay = 20 * time.Millisecond

// lazySync makes deferred Updates durable together: the first one applied
// after a sync arms a timer, and when it fires one synced empty WAL record
// covers every batch applied before it.
//
// Syncing each deferred batch at once (Pebble's group commit) costs one
// fdatasync per batch when they arrive one at a time, as a copy's creates
// and commits through a mount do: two per file. On a virtual disk each is a
// flush of the host's cache, and the flushes slow every other I/O of the
// machine, the copy's own reads of its source among them.
type lazySync struct {
	s     *Store
	delay time.Duration

	mu      sync.Mutex
	pending int64       // deferred batches applied since the latest round's sync began
	timer   *time.Timer // the armed round's; nil while none is armed
	latest  *lazyRound  // the newest round, armed or syncing; nil before the first
	closing bool        // Close has begun: sync at once, arm nothing
	rounds  int64       // rounds synced, for tests
}

// lazyRound is one timer and the sync it ends with.
type lazyRound struct {
	done chan struct{} // closed when the sync has returned
	err  error         // the sync's, set before done is closed
}

// add counts one deferred batch, already applied, and makes sure a sync
// will cover it. The caller is inside s.gate and holds s.writer.
func (l *lazySync) add() {
	l.mu.Lock()
	l.pending++
	if l.timer != nil {
		l.mu.Unlock()
		return
	}
	// The gate stays entered until the round's sync returns, so that Close
	// waits for it.
	if l.closing || l.s.gate.Enter() != nil {
		n := l.pending
		l.pending = 0
		l.mu.Unlock()
		l.sync(n)
		return
	}
	r := &lazyRound{done: make(chan struct{})}
	l.latest = r
	l.timer = time.AfterFunc(l.delay, func() { l.fire(r) })
	l.mu.Unlock()
}

// fire ends round r: one sync for every batch counted so far.
func (l *lazySync) fire(r *lazyRound) {
	defer l.s.gate.Leave()
	l.mu.Lock()
	n := l.pending
	l.pending, l.timer = 0, nil
	l.rounds++
	l.mu.Unlock()
	r.err = l.sync(n)
	close(r.done)
}

// close makes every later deferred batch sync at once and runs the armed
// round's sync now rather than when its timer fires.
func (l *lazySync) close() {
	l.mu.Lock()
	l.closing = true
	t, r := l.timer, l.latest
	l.mu.Unlock()
	if t != nil && t.Stop() {
		l.fire(r) // r is t's round: only fire unarms a timer
	}
}

// sync writes a synced empty WAL record, durable only once everything
// before it in the WAL is, so it covers the n batches counted before it.
func (l *lazySync) sync(n int64) error {
	err := l.s.db.LogData(nil, cpebble.Sync)
	if err != nil {
		// Pebble treats a failed WAL sync as fatal; count it for tests.
		l.s.deferredErrs.Add(1)
	}
	l.s.unsynced.Add(-n)
	return err
}

// current is the round whose sync covers every deferred batch applied so
// far (nil if none is armed or syncing). Called under s.writer, so that no
// batch is applied between the caller's read and this.
func (l *lazySync) current() *lazyRound {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.latest == nil {
		return nil
	}
	select {
	case <-l.latest.done:
		return nil
	default:
		return l.latest
	}
}

// wait returns once r's sync has returned, or ctx ends.
func (r *lazyRound) wait(ctx context.Context) error {
	if r == nil {
		return nil
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}
