package webdav

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/fsview"
	"github.com/kelpfs/kelp/internal/testcluster"
)

// startFilerOnly starts a cluster and a filer; views are made per server.
func startFilerOnly(t *testing.T) *filerserver.Server {
	t.Helper()
	_, s := startFiler(t)
	return s
}

// startFiler starts a cluster of one volume server and a filer over it.
func startFiler(t *testing.T) (*testcluster.Cluster, *filerserver.Server) {
	t.Helper()
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}}})
	log := slog.New(slog.DiscardHandler)
	s, err := filerserver.New(filerserver.Config{Masters: c.MasterAddrs(), Dir: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return c, s
}

// davServer runs a WebDAV server process-alike (its own view and handler)
// over filer s; stop ends it as a restart would.
func davServer(t *testing.T, s *filerserver.Server, root string) (url string, stop func()) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	v, err := fsview.New(context.Background(), fsview.Config{Filer: s.GRPCAddr(), Root: root, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(v, log))
	var once bool
	stop = func() {
		if !once {
			once = true
			srv.Close()
			v.Close()
		}
	}
	t.Cleanup(stop)
	return srv.URL, stop
}

func TestWebDAVLocksSurviveRestart(t *testing.T) {
	s := startFilerOnly(t)
	u1, stop1 := davServer(t, s, "/")
	c, _, _ := do(t, "MKCOL", u1+"/docs", "")
	wantCode(t, "MKCOL", c, 201)
	c, _, _ = do(t, "PUT", u1+"/docs/f", "v1")
	wantCode(t, "PUT", c, 201)
	c, h, _ := do(t, "LOCK", u1+"/docs/f", lockBody, "Timeout", "Second-600", "Content-Type", "application/xml")
	wantCode(t, "LOCK", c, 200)
	token := h.Get("Lock-Token")
	if !strings.HasPrefix(token, "<opaquelocktoken:") {
		t.Fatalf("Lock-Token %q is not an opaquelocktoken URI", token)
	}
	stop1() // the WebDAV process goes away

	u2, _ := davServer(t, s, "/")
	c, _, _ = do(t, "PUT", u2+"/docs/f", "v2")
	wantCode(t, "PUT without the token after a restart", c, 423)
	c, _, _ = do(t, "DELETE", u2+"/docs/f", "")
	wantCode(t, "DELETE of the locked file without the token", c, 423)
	c, _, _ = do(t, "PUT", u2+"/docs/f", "v2", "If", "("+token+")")
	wantCode(t, "PUT with the token", c, 204)
	// A server with another root maps the same filer path to the same lock.
	u3, _ := davServer(t, s, "/docs")
	c, _, _ = do(t, "PUT", u3+"/f", "v3")
	wantCode(t, "PUT without the token through a server rooted at /docs", c, 423)
	// Refresh through the new server, then a shared lock conflicts.
	c, _, body := do(t, "LOCK", u2+"/docs/f", "", "If", "("+token+")", "Timeout", "Second-120")
	wantCode(t, "LOCK refresh", c, 200)
	if !strings.Contains(body, "Second-1") || !strings.Contains(body, "/docs/f") {
		t.Fatalf("refresh answer lacks the timeout or lock root: %s", body)
	}
	// A shared lock conflicts with the exclusive one, which stays.
	shared := strings.Replace(lockBody, "<D:exclusive/>", "<D:shared/>", 1)
	c, _, _ = do(t, "LOCK", u2+"/docs/f", shared, "Content-Type", "application/xml")
	wantCode(t, "shared LOCK over an exclusive one", c, 423)
	c, _, _ = do(t, "LOCK", u3+"/f", lockBody, "Content-Type", "application/xml")
	wantCode(t, "exclusive LOCK over an exclusive one, through another server", c, 423)
	c, _, _ = do(t, "UNLOCK", u2+"/docs/f", "", "Lock-Token", "<opaquelocktoken:forged>")
	if c/100 == 2 {
		t.Fatalf("UNLOCK with a forged token answered %d", c)
	}
	c, _, _ = do(t, "UNLOCK", u2+"/docs/f", "", "Lock-Token", token)
	wantCode(t, "UNLOCK", c, 204)
	c, _, _ = do(t, "PUT", u3+"/f", "v4")
	wantCode(t, "PUT after UNLOCK", c, 204)
}

func TestWebDAVDeadProperties(t *testing.T) {
	s := startFilerOnly(t)
	u, stop := davServer(t, s, "/")
	do(t, "MKCOL", u+"/c", "")
	do(t, "PUT", u+"/c/f", "x")
	patch := `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:x">` +
		`<D:set><D:prop><Z:color>red</Z:color><Z:size xml:lang="en">big <Z:b>really</Z:b></Z:size></D:prop></D:set></D:propertyupdate>`
	for _, p := range []string{"/c/f", "/c"} {
		c, _, body := do(t, "PROPPATCH", u+p, patch, "Content-Type", "application/xml")
		if c != 207 || !strings.Contains(body, "200 OK") || strings.Contains(body, "403") {
			t.Fatalf("PROPPATCH %s: %d %s", p, c, body)
		}
	}
	stop() // stored in the filer: a new server sees them
	u, _ = davServer(t, s, "/")
	named := `<?xml version="1.0"?><D:propfind xmlns:D="DAV:" xmlns:Z="urn:x"><D:prop><Z:color/></D:prop></D:propfind>`
	c, _, body := do(t, "PROPFIND", u+"/c/f", named, "Depth", "0", "Content-Type", "application/xml")
	if c != 207 || !strings.Contains(body, ">red<") {
		t.Fatalf("PROPFIND of a dead property: %d %s", c, body)
	}
	c, _, body = do(t, "PROPFIND", u+"/c", "", "Depth", "1")
	if c != 207 || strings.Count(body, ">red<") != 2 || !strings.Contains(body, "really") {
		t.Fatalf("allprop PROPFIND lacks the dead properties: %d %s", c, body)
	}
	propname := `<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:propname/></D:propfind>`
	c, _, body = do(t, "PROPFIND", u+"/c/f", propname, "Depth", "0", "Content-Type", "application/xml")
	if c != 207 || !strings.Contains(body, "color") || !strings.Contains(body, "getcontentlength") || strings.Contains(body, "red") {
		t.Fatalf("propname PROPFIND: %d %s", c, body)
	}
	// The view (so a mount) sees them as xattrs.
	v, err := fsview.New(context.Background(), fsview.Config{Filer: s.GRPCAddr(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if b, err := v.GetXattr(context.Background(), "/c/f", "user.dav:{urn:x}color"); err != nil || !strings.Contains(string(b), "red") {
		t.Fatalf("xattr of the dead property: %q %v", b, err)
	}
	// Remove one; a live property cannot be patched and nothing changes.
	c, _, _ = do(t, "PROPPATCH", u+"/c/f", `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:x">`+
		`<D:remove><D:prop><Z:color/></D:prop></D:remove></D:propertyupdate>`, "Content-Type", "application/xml")
	wantCode(t, "PROPPATCH remove", c, 207)
	c, _, body = do(t, "PROPPATCH", u+"/c/f", `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:x">`+
		`<D:set><D:prop><Z:color>blue</Z:color><D:getcontentlength>9</D:getcontentlength></D:prop></D:set></D:propertyupdate>`, "Content-Type", "application/xml")
	if c != 207 || !strings.Contains(body, "403") || !strings.Contains(body, "424") {
		t.Fatalf("PROPPATCH of a live property: %d %s, want 403 for it and 424 for the rest", c, body)
	}
	c, _, body = do(t, "PROPFIND", u+"/c/f", named, "Depth", "0", "Content-Type", "application/xml")
	if c != 207 || strings.Contains(body, "red") || strings.Contains(body, "blue") || !strings.Contains(body, "404") {
		t.Fatalf("PROPFIND after remove: %d %s", c, body)
	}
}

func TestWebDAVBasicAuth(t *testing.T) {
	s := startFilerOnly(t)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(file, []byte("# users\nalice:"+string(hash)+"\n\n"), 0o600); err != nil {
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
	u := srv.URL()
	call := func(user, pass string) (int, http.Header) {
		req, _ := http.NewRequest("PROPFIND", u+"/", nil)
		req.Header.Set("Depth", "0")
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		var resp *http.Response
		var err error
		for range 100 { // Run connects the view before serving
			if resp, err = http.DefaultClient.Do(req); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	c, h := call("", "")
	if c != 401 || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Basic ") {
		t.Fatalf("no credentials: %d %q, want 401 with a Basic challenge", c, h.Get("WWW-Authenticate"))
	}
	c, _ = call("alice", "wrong")
	wantCode(t, "a wrong password", c, 401)
	c, _ = call("bob", "s3cret")
	wantCode(t, "an unknown user", c, 401)
	c, _ = call("alice", "s3cret")
	wantCode(t, "valid credentials", c, 207)
	// A client that waits for "100 Continue" before it sends its body
	// gets the 401 at once, on a connection then closed.
	head := rawAnswer(t, strings.TrimPrefix(u, "http://"), "PUT /f HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n")
	if !strings.HasPrefix(head, "HTTP/1.1 401 ") || !strings.Contains(head, "\r\nConnection: close\r\n") {
		t.Fatalf("PUT without credentials waiting for 100 Continue: %q", head)
	}

	for _, bad := range []string{"alice:plain-password\n", "nocolon\n", ""} {
		f := filepath.Join(t.TempDir(), "bad")
		os.WriteFile(f, []byte(bad), 0o600)
		if _, err := LoadUsers(f); err == nil {
			t.Fatalf("users file %q accepted", bad)
		}
	}
}

func TestWebDAVBadInput(t *testing.T) {
	s := startFilerOnly(t)
	u, _ := davServer(t, s, "/")
	do(t, "MKCOL", u+"/d", "")
	do(t, "PUT", u+"/d/f", "x")
	// Encoded traversal, in the request path and in a Destination.
	for _, p := range []string{"/d/%2e%2e/%2e%2e/etc/passwd", "/d/%2E%2E/f", "/%2e%2e"} {
		req, _ := http.NewRequest("GET", u+"/", nil)
		req.URL.RawPath, req.URL.Path = "", ""
		req.URL.Opaque = "//" + req.URL.Host + p
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 4 {
			t.Fatalf("GET %s answered %d, want 4xx", p, resp.StatusCode)
		}
	}
	for _, d := range []string{u + "/d/%2e%2e/%2e%2e/g", u + "/d/%2E%2E/g", "http://[::1"} {
		c, _, _ := do(t, "MOVE", u+"/d/f", "", "Destination", d)
		if c/100 != 4 {
			t.Fatalf("MOVE to %s answered %d, want 4xx", d, c)
		}
	}
	// Malformed XML and an oversized body: 4xx, and nothing changes.
	bodies := map[string]string{
		"PROPFIND":  `<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop>`,
		"PROPPATCH": `<D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><Z:x xmlns:Z="u">1</Z:y></D:prop></D:set>`,
		"LOCK":      `<D:lockinfo xmlns:D="DAV:"><D:lockscope>`,
	}
	for m, b := range bodies {
		c, _, _ := do(t, m, u+"/d/f", b, "Content-Type", "application/xml", "Depth", "0")
		if c/100 != 4 {
			t.Fatalf("%s with malformed XML answered %d, want 4xx", m, c)
		}
	}
	big := `<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop>` + strings.Repeat(`<Z:p xmlns:Z="u"/>`, 200000) + `</D:prop></D:propfind>`
	c, _, _ := do(t, "PROPFIND", u+"/d/f", big, "Content-Type", "application/xml", "Depth", "0")
	if c/100 != 4 {
		t.Fatalf("a %d-byte PROPFIND answered %d, want 4xx", len(big), c)
	}
	bigPatch := `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><Z:p xmlns:Z="u">` +
		strings.Repeat("x", 2<<20) + `</Z:p></D:prop></D:set></D:propertyupdate>`
	c, _, _ = do(t, "PROPPATCH", u+"/d/f", bigPatch, "Content-Type", "application/xml")
	if c/100 != 4 {
		t.Fatalf("an oversized PROPPATCH answered %d, want 4xx", c)
	}
	c, _, body := do(t, "PROPFIND", u+"/d/f", "", "Depth", "0")
	if c != 207 || strings.Contains(body, `xmlns="u"`) || strings.Contains(body, "lockdiscovery><D:activelock") {
		t.Fatalf("after the refused requests: %d %s", c, body)
	}
	c, _, body = do(t, "GET", u+"/d/f", "")
	if c != 200 || body != "x" {
		t.Fatalf("GET after the refused requests: %d %q", c, body)
	}
}

// rawAnswer sends req on a new connection to addr (host:port) and returns
// the head of the answer: what arrives before the server stops sending or
// 10 s pass.
func rawAnswer(t *testing.T, addr, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, 4096)
	n, err := io.ReadAtLeast(c, b, len("HTTP/1.1 200 "))
	if err != nil {
		t.Fatalf("no answer to %q: %v", req, err)
	}
	return string(b[:n])
}
