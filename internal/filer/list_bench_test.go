package filer

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkListDirectoryPages lists a directory of KELP_LIST_DIR_ENTRIES
// entries (default 1,000,000) page by page, 1,000 entries a page, from
// the first page to the last, as an S3 listing or `ls` over HTTP does.
// A page reads only its own entries from the store, so the time per page
// is the same at the start and the end of the directory, and the heap
// does not grow with the directory: it reports cpu-µs/page for the first
// and the last tenth of the pages and the largest live heap seen.
// Filling the directory takes minutes, so it does not run under -short.
func BenchmarkListDirectoryPages(b *testing.B) {
	if testing.Short() {
		b.Skip("fills a directory of a million entries")
	}
	n := 1_000_000
	if v := os.Getenv("KELP_LIST_DIR_ENTRIES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 10_000 {
			b.Fatalf("KELP_LIST_DIR_ENTRIES=%q: want an integer >= 10000", v)
		}
	}
	e := newEnv(b, Config{})
	ctx := context.Background()
	fillDir(b, e.f, "/big", n)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	const page = 1000
	pages := (n + page - 1) / page
	tenth := max(pages/10, 1)
	var firstCPU, lastCPU time.Duration
	var peak uint64
	for b.Loop() {
		after, i := "", 0
		for {
			c0 := cpuNow()
			es, more, err := e.f.ListEntries(ctx, "/big", ListOptions{StartAfter: after, Limit: page})
			if err != nil {
				b.Fatal(err)
			}
			d := cpuNow() - c0
			if i < tenth {
				firstCPU += d
			} else if i >= pages-tenth {
				lastCPU += d
			}
			if i%100 == 0 {
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapAlloc)
			}
			if len(es) > 0 {
				after = es[len(es)-1].Name()
			}
			i++
			if !more {
				break
			}
		}
		if i != pages {
			b.Fatalf("%d pages, want %d", i, pages)
		}
	}
	per := float64(tenth) * float64(b.N)
	b.ReportMetric(float64(firstCPU.Microseconds())/per, "first-cpu-µs/page")
	b.ReportMetric(float64(lastCPU.Microseconds())/per, "last-cpu-µs/page")
	b.ReportMetric(float64(peak-min(peak, base))/(1<<20), "peak-heap-growth-MiB")
}

// fillDir creates n empty files in dir, 10,000 to a transaction.
func fillDir(b *testing.B, f *Filer, dir string, n int) {
	ctx := context.Background()
	if err := f.CreateEntry(ctx, &Entry{Path: dir, Mode: os.ModeDir | 0o755}, CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i += 10_000 {
		err := f.Atomically(ctx, func(bt Batch) error {
			for j := i; j < min(i+10_000, n); j++ {
				if err := bt.Create(&Entry{Path: fmt.Sprintf("%s/file-%08d", dir, j), Mode: 0o644}, CreateOptions{NoParents: true}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// cpuNow is the CPU time the process has used.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
