package benchmark

import (
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress draws a phase's bar from a counter the workers bump. The workers
// never touch the bar: at tens of thousands of requests a second its lock
// would be the benchmark's bottleneck, so a ticker copies the counter five
// times a second instead.
type progress struct {
	stopc chan struct{}
	done  chan struct{}
}

// startProgress starts the bar's goroutine, which stop ends; with no
// writer, or a file that is not a terminal, it draws nothing.
func startProgress(w io.Writer, name, unit string, total int64, count *atomic.Int64) *progress {
	if w == nil || total <= 0 {
		return nil
	}
	if f, ok := w.(*os.File); ok && !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(name),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString(unit),
		progressbar.OptionSetWidth(30),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetRenderBlankState(true), // show the phase has begun
	)
	p := &progress{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stopc:
				_ = bar.Set64(count.Load())
				_ = bar.Finish()
				_ = bar.Exit()
				return
			case <-t.C:
				_ = bar.Set64(count.Load())
			}
		}
	}()
	return p
}

// stop draws the final count, clears the bar and waits for its goroutine.
func (p *progress) stop() {
	if p == nil {
		return
	}
	close(p.stopc)
	<-p.done
}
