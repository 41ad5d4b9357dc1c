package benchmark

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// PhaseOptions shape one measured phase of a benchmark.
type PhaseOptions struct {
	Name        string // "write", "get", ...: the progress bar's label and the log's
	Unit        string // what a request is called in the bar: "req", "obj"
	Concurrency int
	Progress    io.Writer // nil, or not a terminal: no bar
	Logger      *slog.Logger
}

// RunPhase runs do for items 0..n-1 on opts.Concurrency goroutines and
// measures every call. worker is the calling goroutine's index, so do can keep
// per-goroutine state in a slice; do returns the bytes moved by a successful
// request. Failures are counted, never retried. Every `kelp benchmark` tool
// measures with it, so their figures mean the same.
func RunPhase(ctx context.Context, opts PhaseOptions, n int, do func(worker, i int) (int64, error)) Phase {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	lat := make([]int64, n) // nanoseconds; -1 marks a failure
	// next is the next item to claim; every claimed item below n is finished
	// by the time the workers return, even when ctx ends the phase early.
	var next, done, failed, moved atomic.Int64
	var firstErr atomic.Pointer[error]
	bar := startProgress(opts.Progress, opts.Name, opts.Unit, int64(n), &done)
	start := time.Now()
	var wg sync.WaitGroup
	for id := 0; id < min(max(opts.Concurrency, 1), max(n, 1)); id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				t0 := time.Now()
				bytes, err := do(id, i)
				lat[i] = int64(time.Since(t0))
				if err != nil {
					lat[i] = -1
					if failed.Add(1) <= 3 {
						opts.Logger.Warn("benchmark: request failed", "phase", opts.Name, "err", err)
					}
					firstErr.CompareAndSwap(nil, &err)
				} else {
					moved.Add(bytes)
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

// PrintPhase prints a phase's figures; unit names a request ("requests",
// "objects"); notes qualify them (ReadNote), one line each.
func PrintPhase(out io.Writer, name, unit string, p Phase, notes ...string) {
	fmt.Fprintf(out, "%-7s %d %s, %d failed, %.3f s, %.1f %s/s, %.2f MB/s\n",
		name+":", p.Requests, unit, p.Failed, p.Seconds, p.RequestsPerSec, unit, p.MBPerSec)
	fmt.Fprintf(out, "        latency ms: p50 %.3f, p90 %.3f, p99 %.3f, max %.3f\n",
		p.P50Ms, p.P90Ms, p.P99Ms, p.MaxMs)
	for _, n := range notes {
		fmt.Fprintf(out, "        %s\n", n)
	}
	if p.FirstError != "" {
		fmt.Fprintf(out, "        first error: %s\n", p.FirstError)
	}
	fmt.Fprintln(out)
}
