package fuse

import (
	"context"
	"sync"
	"time"
)

// Interrupts. When a process waiting for a request of this mount gets a
// signal it does not ignore, the kernel sends an INTERRUPT for the request,
// and go-fuse cancels the request's context. Go programs get such signals
// all the time (the runtime preempts goroutines with SIGURG; the more so
// under load, and the tests' own process is one), and so do processes with
// timers or job control. A local file system does not fail a stat, an
// rmdir or a write because of a signal, and programs do not expect EINTR
// from them; worse, a change cancelled on its way may well have been made
// in the filer anyway, so that EINTR (or the EIO of a cancelled gRPC call)
// would be a wrong answer and a retry would get another one (ENOENT after
// the rmdir it did make).
//
// So every request is served with a context the kernel's interrupt does
// not cancel at once: it is cancelled only if the request, interrupted, is
// still on its way interruptGrace after it began (a process killed while
// the filer does not answer is let go then; the kernel waits for the
// answer even for SIGKILL). Only waiting for a lock (SETLKW) honours the interrupt at once:
// that wait may be long by design, and the kernel restarts it after the
// signal's handler (or lets the process die).
const interruptGrace = 30 * time.Second

// uninterrupted returns ctx, with its values (the caller's uid and gid),
// cancelled only once the request has run interruptGrace and ctx is
// cancelled (checked then, and every second after); done must be called
// when the request is answered. No goroutine per request: a timer only.
func uninterrupted(ctx context.Context) (context.Context, context.CancelFunc) {
	out, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var mu sync.Mutex
	finished := false
	var t *time.Timer
	check := func() {
		mu.Lock()
		defer mu.Unlock()
		if finished {
			return // ctx may be another request's by now: not read
		}
		if ctx.Err() != nil {
			cancel()
			return
		}
		t.Reset(time.Second)
	}
	mu.Lock()
	t = time.AfterFunc(interruptGrace, check)
	mu.Unlock()
	return out, func() {
		mu.Lock()
		finished = true
		t.Stop()
		mu.Unlock()
		cancel()
	}
}
