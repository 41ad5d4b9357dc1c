package fsview

import (
	"sync"
	"sync/atomic"
)

// maxIdleWorkers bounds the goroutines kept waiting for a task.
const maxIdleWorkers = 32

// workers runs the view's background tasks (creates answered early,
// commits after the last close, chunk uploads, fetches ahead) on goroutines
// kept for the next task. A new goroutine starts on a small stack, and a
// task that calls through gRPC or the HTTP client grows it two or three
// times, each growth a copy that walks every frame: 7% of the mount's CPU in
// an untar of 10,000 files of 4 KiB. A kept goroutine keeps its grown stack
// (until a garbage collection finds it idle and halves it).
type workers struct {
	tasks chan func()
	done  chan struct{}
	idle  atomic.Int32
	once  sync.Once
}

func newWorkers() *workers {
	return &workers{tasks: make(chan func()), done: make(chan struct{})}
}

// run starts task on an idle worker, or on a new one when none waits.
func (w *workers) run(task func()) {
	select {
	case w.tasks <- task:
	default:
		go w.work(task)
	}
}

func (w *workers) work(task func()) {
	for {
		task()
		if w.idle.Add(1) > maxIdleWorkers {
			w.idle.Add(-1)
			return
		}
		select {
		case task = <-w.tasks:
			w.idle.Add(-1)
		case <-w.done:
			w.idle.Add(-1)
			return
		}
	}
}

// stop ends the idle workers; tasks still running finish, and run keeps
// working (on new goroutines that end with their task).
func (w *workers) stop() { w.once.Do(func() { close(w.done) }) }
