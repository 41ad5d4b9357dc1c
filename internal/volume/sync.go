package volume

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// syncer implements group commit: writers register the append number they
// need durable and wait; one goroutine per volume runs fdatasync and, when it
// returns, releases every writer whose append happened before the sync began.
// Writers that arrive during a sync share the next one.
type syncer struct {
	mu        sync.Mutex
	cond      *sync.Cond
	synced    uint64
	requested uint64
	err       error // sticky: after a failed fsync nothing is acknowledged
	stopped   bool
	waiting   int // writers blocked in wait, for tests
	kick      chan struct{}
	syncs     uint64        // completed fdatasyncs, for benchmarks
	syncTime  time.Duration // time spent in them by the syncer
	timer     bool          // an unhurried writer's kick is on its way
	// unhurried is how long an unhurried writer's sync may wait
	// (unhurriedSyncDelay; tests change it).
	unhurried time.Duration
}

// unhurriedSyncDelay is the longest an unhurried write's fsync waits for
// other writes to share it (WithUnhurriedSync).
const unhurriedSyncDelay = 10 * time.Millisecond

type unhurriedKey struct{}

// WithUnhurriedSync returns a context under which Write is still answered
// only once the needle is durable, but its fsync may wait up to 10 ms for
// other writes to share it instead of starting at once. For writers nobody
// waits for: the mount's uploads of files already closed, which arrive one
// at a time as a copy closes them, so that group commit alone gives each
// its own fsync, and on a virtual disk each fsync is a flush of the host's
// cache that slows every other I/O of the machine. A write without the
// flag starts the sync at once, and it covers the unhurried ones waiting.
func WithUnhurriedSync(ctx context.Context) context.Context {
	return context.WithValue(ctx, unhurriedKey{}, true)
}

// UnhurriedSync reports whether ctx carries WithUnhurriedSync.
func UnhurriedSync(ctx context.Context) bool {
	v, _ := ctx.Value(unhurriedKey{}).(bool)
	return v
}

func (s *syncer) init() {
	s.cond = sync.NewCond(&s.mu)
	s.kick = make(chan struct{}, 1)
	s.unhurried = unhurriedSyncDelay
}

// wait blocks until append seq is durable. It does not take a context: an
// fdatasync cannot be abandoned half way, and the writer must learn its outcome.
func (s *syncer) wait(seq uint64) error {
	s.mu.Lock()
	if seq > s.requested {
		s.requested = seq
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	s.mu.Unlock()
	return s.await(seq)
}

// await blocks until append seq is durable, syncing failed or the volume
// closed; the sync itself is requested by the caller.
func (s *syncer) await(seq uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting++
	for s.synced < seq && s.err == nil && !s.stopped {
		s.cond.Wait()
	}
	s.waiting--
	switch {
	case s.synced >= seq:
		return nil
	case s.err != nil:
		return fmt.Errorf("%w: fsync: %w", ErrBroken, s.err)
	default:
		return ErrClosed
	}
}

// waitUnhurried is wait, but the sync starts only once the unhurried delay
// has passed, unless a hurried writer (wait) or an earlier unhurried
// writer's timer starts it first.
func (s *syncer) waitUnhurried(seq uint64) error {
	s.mu.Lock()
	if s.synced < seq && !s.timer {
		s.timer = true
		time.AfterFunc(s.unhurried, s.timerFired)
	}
	s.mu.Unlock()
	return s.await(seq)
}

func (s *syncer) timerFired() {
	s.mu.Lock()
	s.timer = false
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// done records that appends up to seq are durable (or that syncing failed).
// After a failure nothing more is ever marked durable: on Linux a later
// fsync of the same file can succeed although the pages the failed one
// could not write were dropped, so its success proves nothing about them.
func (s *syncer) done(seq uint64, err error) {
	s.mu.Lock()
	switch {
	case s.err != nil:
	case err != nil:
		s.err = err
	case seq > s.synced:
		s.synced = seq
	}
	s.syncs++
	s.cond.Broadcast()
	s.mu.Unlock()
}

// failure returns the error of the fsync that failed, if one did.
func (s *syncer) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// waiters returns how many writers are blocked waiting for a sync.
func (s *syncer) waiters() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

func (s *syncer) shutdown() {
	s.mu.Lock()
	s.stopped = true
	s.cond.Broadcast()
	s.mu.Unlock()
}

func (v *Volume) syncLoop() {
	defer v.wg.Done()
	for {
		select {
		case <-v.stop:
			return
		case <-v.syncer.kick:
		}
		v.gather()
		// The file and the append count are read together under mu, so the
		// sync covers every append up to target (a vacuum switch makes the
		// appends to the file it replaces durable itself).
		v.mu.RLock()
		d := v.dat.acquire()
		target := v.seq
		v.mu.RUnlock()
		v.syncer.mu.Lock()
		covered := target <= v.syncer.synced
		v.syncer.mu.Unlock()
		if covered {
			// An unhurried writer's timer, after a hurried writer's sync
			// covered it: nothing new to sync.
			d.release()
			continue
		}
		start := time.Now()
		err := d.f.Sync()
		d.release()
		v.syncer.mu.Lock()
		v.syncer.syncTime += time.Since(start)
		v.syncer.mu.Unlock()
		v.syncer.done(target, err)
		if err != nil {
			v.markBroken(err)
		}
	}
}

// gather lets writers released by the previous sync append again before the
// next sync starts. Without it the writers split into two groups that take
// turns, each sync carrying only half of them. It yields the processor while
// appends keep arriving, for a few rounds at most, so a lone writer pays
// almost nothing.
func (v *Volume) gather() {
	last := v.appends.Load()
	for range 8 {
		runtime.Gosched()
		now := v.appends.Load()
		if now == last {
			return
		}
		last = now
	}
}
