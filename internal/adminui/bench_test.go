package adminui

import (
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// BenchmarkPages renders each page for a simulated cluster of 1,000
// volume servers and 100,000 volumes (two copies each) held in a real
// in-memory topology: the target is 200 ms per page (docs/admin-ui.md).
func BenchmarkPages(b *testing.B) {
	src := newFakeSource(1000, 100000)
	ui, err := New(Config{User: "admin", Password: "s3cret", Source: src, Now: func() time.Time { return src.now }})
	if err != nil {
		b.Fatal(err)
	}
	for _, page := range []string{"/", "/topology", "/topology.svg", "/volumes", "/volumes?sort=garbage&desc=1&collection=photos&page=20", "/collections", "/maintenance"} {
		b.Run(page, func(b *testing.B) {
			req := httptest.NewRequest("GET", page, nil)
			req.SetBasicAuth("admin", "s3cret")
			var size int
			cpu0 := cpuTime()
			for b.Loop() {
				w := httptest.NewRecorder()
				ui.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", page, w.Code, w.Body)
				}
				size = w.Body.Len()
			}
			// On a shared machine wall time per page mostly measures the
			// other processes; the process's CPU time per page does not.
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
			b.ReportMetric(float64(size), "bytes/page")
		})
	}
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
