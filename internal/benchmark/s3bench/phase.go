package s3bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/kelpfs/kelp/internal/benchmark"
)

// runPhase runs do for items 0..n-1 on workers goroutines and measures each
// call. do returns the bytes moved by a successful request.
func runPhase(ctx context.Context, cfg *Config, name string, n, workers int, do func(w *worker, i int) (int64, error)) benchmark.Phase {
	lat := make([]int64, n) // nanoseconds; -1 marks a failure
	var next, done, failed, moved atomic.Int64
	var firstErr atomic.Pointer[error]
	bar := startProgress(cfg.Progress, name, int64(n), &done)
	start := time.Now()
	var wg sync.WaitGroup
	for id := 0; id < min(workers, max(n, 1)); id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &worker{}
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				t0 := time.Now()
				m, err := do(w, i)
				lat[i] = int64(time.Since(t0))
				if err != nil {
					lat[i] = -1
					if failed.Add(1) <= 3 {
						cfg.Logger.Warn("s3bench: request failed", "phase", name, "err", err)
					}
					firstErr.CompareAndSwap(nil, &err)
				} else {
					moved.Add(m)
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	bar.stop()
	p := summarize(lat[:min(int(next.Load()), n)], int(failed.Load()), moved.Load(), elapsed)
	if e := firstErr.Load(); e != nil {
		p.FirstError = (*e).Error()
	}
	return p
}

// summarize turns per-request latencies (ns, -1 for a failure) into a
// Phase, computed as `kelp benchmark` does. It sorts lat in place.
func summarize(lat []int64, failed int, moved int64, elapsed time.Duration) benchmark.Phase {
	p := benchmark.Phase{Requests: len(lat), Failed: failed, Seconds: round3(elapsed.Seconds())}
	ok := slices.DeleteFunc(lat, func(l int64) bool { return l < 0 })
	if len(ok) == 0 {
		return p
	}
	slices.Sort(ok)
	if s := elapsed.Seconds(); s > 0 {
		p.RequestsPerSec = round3(float64(len(ok)) / s)
		p.MBPerSec = round3(float64(moved) / 1e6 / s)
	}
	p.P50Ms = percentileMs(ok, 0.50)
	p.P90Ms = percentileMs(ok, 0.90)
	p.P99Ms = percentileMs(ok, 0.99)
	p.MaxMs = round3(float64(ok[len(ok)-1]) / 1e6)
	return p
}

// percentileMs is the nearest-rank percentile of sorted, in milliseconds.
func percentileMs(sorted []int64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return round3(float64(sorted[i]) / 1e6)
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

func printPhase(out io.Writer, name string, p benchmark.Phase) {
	fmt.Fprintf(out, "%-5s %d requests, %d failed, %.3f s, %.1f objects/s, %.2f MB/s\n",
		name+":", p.Requests, p.Failed, p.Seconds, p.RequestsPerSec, p.MBPerSec)
	fmt.Fprintf(out, "      latency ms: p50 %.3f, p90 %.3f, p99 %.3f, max %.3f\n",
		p.P50Ms, p.P90Ms, p.P99Ms, p.MaxMs)
	if p.FirstError != "" {
		fmt.Fprintf(out, "      first error: %s\n", p.FirstError)
	}
	fmt.Fprintln(out)
}

// progress draws a phase's bar from the workers' counter, five times a
// second, so that the bar's lock never slows the workers down.
type progress struct {
	stopc, done chan struct{}
}

// startProgress starts the bar's goroutine, which stop ends; with no
// writer, or a file that is not a terminal, it draws nothing.
func startProgress(w io.Writer, name string, total int64, count *atomic.Int64) *progress {
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
		progressbar.OptionSetItsString("obj"),
		progressbar.OptionSetWidth(30),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetRenderBlankState(true),
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

func (p *progress) stop() {
	if p == nil {
		return
	}
	close(p.stopc)
	<-p.done
}

// discardLogger is the Logger of a Config that gives none.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
