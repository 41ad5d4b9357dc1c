package webdav

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/testcluster"
)

// TestWebDAVGetFilerDown: a GET of an existing file the view has not seen
// yet, while the filer is unreachable, answers 5xx (502/503/504), never
// 404: a client must not conclude that the file is gone.
func TestWebDAVGetFilerDown(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}}})
	s, err := filerserver.New(filerserver.Config{Masters: c.MasterAddrs(), Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	stopped := false
	stopFiler := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stopFiler)
	writer, _ := davServer(t, s, "/")
	reader, _ := davServer(t, s, "/")
	cl := &http.Client{Timeout: 60 * time.Second}
	req, _ := http.NewRequest("PUT", writer+"/f.txt", strings.NewReader("content"))
	resp, err := cl.Do(req)
	if err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("PUT: %v %v", resp, err)
	}
	resp.Body.Close()
	stopFiler()
	resp, err = cl.Get(reader + "/f.txt")
	if err != nil {
		t.Fatalf("GET with the filer down: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 5 {
		t.Fatalf("GET of an existing file with the filer down: %s %q, want 502/503/504", resp.Status, body)
	}
}

// TestWebDAVGetContentUnreadable: a GET of a file whose metadata the filer
// has but whose only volume server is down answers 503 before any byte,
// never a 200 whose body stops short.
func TestWebDAVGetContentUnreadable(t *testing.T) {
	c, s := startFiler(t)
	writer, _ := davServer(t, s, "/")
	reader, _ := davServer(t, s, "/")
	cl := &http.Client{Timeout: 2 * time.Minute}
	content := strings.Repeat("0123456789", 10000)
	req, _ := http.NewRequest("PUT", writer+"/f.txt", strings.NewReader(content))
	resp, err := cl.Do(req)
	if err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("PUT: %v %v", resp, err)
	}
	resp.Body.Close()
	c.Volume[0].Stop()
	resp, err = cl.Get(reader + "/f.txt")
	if err != nil {
		t.Fatalf("GET with the volume server down: %v", err)
	}
	body, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("GET with the content unreadable: %s, %d bytes (read error %v), want 503 with Retry-After", resp.Status, len(body), rerr)
	}
}
