package volume

import (
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
}

func (s *syncer) init() {
	s.cond = sync.NewCond(&s.mu)
	s.kick = make(chan struct{}, 1)
}

// wait blocks until append seq is durable. It does not take a context: an
// fdatasync cannot be abandoned half way, and the writer must learn its outcome.
func (s *syncer) wait(seq uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq > s.requested {
		s.requested = seq
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
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
