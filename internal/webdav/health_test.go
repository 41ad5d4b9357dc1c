package webdav

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/kelpfs/kelp/internal/fsview"
)

// GET /healthz answers without credentials (Kubernetes probes and load
// balancers have none), like every Kelp server; everything else, and a
// signed GET of a file named healthz, still goes through auth and WebDAV.
func TestWebDAVHealthz(t *testing.T) {
	s := startFilerOnly(t)
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(file, []byte("alice:"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Port: 0, UsersFile: file, Logger: slog.New(slog.DiscardHandler),
		View: fsview.Config{Filer: s.GRPCAddr()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	call := func(method, path, body string, auth bool) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL()+path, strings.NewReader(body))
		if auth {
			req.SetBasicAuth("alice", "pw")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if c, b := call("GET", "/healthz", "", false); c != 200 || strings.TrimSpace(b) != "ok" {
		t.Fatalf("GET /healthz: %d %q, want 200 ok", c, b)
	}
	if c, _ := call("HEAD", "/healthz", "", false); c != 200 {
		t.Fatalf("HEAD /healthz: %d, want 200", c)
	}
	if c, _ := call("PROPFIND", "/healthz", "", false); c != 401 {
		t.Fatalf("PROPFIND /healthz without credentials: %d, want 401", c)
	}
	if c, _ := call("PUT", "/healthz", "a file", true); c/100 != 2 {
		t.Fatalf("PUT /healthz: %d", c)
	}
	if c, b := call("GET", "/healthz", "", true); c != 200 || b != "a file" {
		t.Fatalf("signed GET /healthz: %d %q, want the file", c, b)
	}
	if c, _ := call("GET", "/healthz?x=1", "", false); c != 401 {
		t.Fatalf("GET /healthz?x=1 without credentials: %d, want 401 (only the bare probe is open)", c)
	}
}
