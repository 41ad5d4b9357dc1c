package volumeserver

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/httpserve"
	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/store"
	"github.com/kelpfs/kelp/internal/ttl"
)

// BenchmarkReadMetricsOverhead reads a 1 KiB file through the data path's
// handler in process (no network), without and with the request metrics:
// the difference is what measuring costs a request.
func BenchmarkReadMetricsOverhead(b *testing.B) {
	s, err := New(Config{IP: "127.0.0.1", Disks: []store.DiskConfig{{Dir: b.TempDir(), MaxVolumes: 1}},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.store.Allocate(1, "", replication.Code{}, ttl.TTL{}); err != nil {
		b.Fatal(err)
	}
	path := "/" + fid.FileID{Volume: 1, Key: 1, Cookie: 0x1234}.String()
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodPut, path, bytes.NewReader(make([]byte, 1024))))
	if w.Code != http.StatusCreated {
		b.Fatalf("PUT: %d %s", w.Code, w.Body)
	}
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{{"bare", httpserve.Recover(s.routes(), s.log)}, {"measured", s.Handler()}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			req := httptest.NewRequest(http.MethodGet, path, nil)
			for b.Loop() {
				w := &discardWriter{h: http.Header{}}
				bc.h.ServeHTTP(w, req)
				if w.code != 0 && w.code != 200 {
					b.Fatalf("GET: %d", w.code)
				}
			}
		})
	}
}

type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Write(p []byte) (int, error) { return io.Discard.Write(p) }
