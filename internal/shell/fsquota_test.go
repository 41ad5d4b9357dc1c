package shell

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/chunk/chunktest"
	"github.com/kelpfs/kelp/internal/filerserver"
)

func TestFSQuota(t *testing.T) {
	s, err := filerserver.New(filerserver.Config{Dir: t.TempDir(), Blobs: chunktest.New(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	put := func(p, body string) int {
		req, _ := http.NewRequest(http.MethodPut, "http://"+s.Addr()+p, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := put("/vol/a", "12345"); c != http.StatusCreated {
		t.Fatalf("put: %d", c)
	}
	sh, out := newTestShell(t, "127.0.0.1:9333", 0)
	f := "-filer=" + s.Addr()
	got := mustRun(t, sh, out, "fs.quota "+f+" -path=/vol -bytes=8 -files=10")
	wantLines(t, got, "/vol: bytes 5 B of 8 B, entries 1 of 10")
	if c := put("/vol/b", "12345"); c != http.StatusInsufficientStorage {
		t.Fatalf("put past the quota: %d", c)
	}
	got = mustRun(t, sh, out, "fs.quota "+f+" -list")
	wantLines(t, got, "/vol: bytes 5 B of 8 B, entries 1 of 10")
	got = mustRun(t, sh, out, "fs.quota "+f+" -path=/vol -remove")
	wantLines(t, got, "quota of /vol removed")
	if err := run(t, sh, "fs.quota "+f+" -path=/vol"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("quota after removal: %v", err)
	}
	if err := run(t, sh, "fs.quota "+f+" -path=/vol -bytes=lots"); err == nil {
		t.Fatal("bad -bytes accepted")
	}
}
