package webdav

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/fsview"
)

// TestWebDAVPutAtomic: a PUT replaces a file's content only once its whole
// body arrived. While the body is on its way a GET sees the old content
// (not an empty or partial file), and a PUT whose upload fails leaves the
// old file as it was.
func TestWebDAVPutAtomic(t *testing.T) {
	s := startFilerOnly(t)
	log := slog.New(slog.DiscardHandler)
	v, err := fsview.New(context.Background(), fsview.Config{Filer: s.GRPCAddr(), Root: "/", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	bodyRead := make(chan struct{}) // closed when a PUT's body was first read
	var once sync.Once
	var puts sync.WaitGroup // PUT handlers running
	h := Handler(v, log)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			r.Body = &signalBody{ReadCloser: r.Body, first: func() { once.Do(func() { close(bodyRead) }) }}
			puts.Add(1)
			defer puts.Done()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cl := &http.Client{Timeout: 60 * time.Second}
	get := func() string {
		t.Helper()
		resp, err := cl.Get(srv.URL + "/f.txt")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET: %s", resp.Status)
		}
		return string(b)
	}
	old := strings.Repeat("old content ", 1000)
	req, _ := http.NewRequest("PUT", srv.URL+"/f.txt", strings.NewReader(old))
	resp, err := cl.Do(req)
	if err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("first PUT: %v %v", resp, err)
	}
	resp.Body.Close()

	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.CloseWithError(errors.New("test over")) }) // before srv.Close
	req, _ = http.NewRequest("PUT", srv.URL+"/f.txt", pr)
	done := make(chan error, 1)
	go func() {
		resp, err := cl.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				err = errors.New("a PUT whose body failed succeeded: " + resp.Status)
			}
		}
		done <- err
	}()
	if _, err := pw.Write([]byte(strings.Repeat("new partial ", 500))); err != nil {
		t.Fatal(err)
	}
	<-bodyRead
	if got := get(); got != old {
		t.Fatalf("during a PUT a GET saw %d bytes %.30q..., want the old content", len(got), got)
	}
	pw.CloseWithError(errors.New("client gave up"))
	<-done
	puts.Wait() // the server is done with the failed PUT (and its lock)
	if got := get(); got != old {
		t.Fatalf("after a failed PUT the file holds %d bytes %.30q..., want the old content", len(got), got)
	}
	// A complete PUT replaces it.
	req, _ = http.NewRequest("PUT", srv.URL+"/f.txt", strings.NewReader("new"))
	if resp, err := cl.Do(req); err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("PUT: %v %v", resp, err)
	}
	if got := get(); got != "new" {
		t.Fatalf("after a PUT: %q", got)
	}
	// No staging file is left in the listing.
	ents, err := v.ReadDir(context.Background(), "/")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name != "f.txt" {
			t.Errorf("left in the directory: %s", e.Name)
		}
	}
}

type signalBody struct {
	io.ReadCloser
	first func()
}

func (b *signalBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.first()
	}
	return n, err
}
