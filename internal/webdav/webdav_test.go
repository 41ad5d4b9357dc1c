package webdav

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/fsview"
	"github.com/kelpfs/kelp/internal/testcluster"
	"github.com/kelpfs/kelp/internal/testutil"
)

func startDAV(t *testing.T) (string, *fsview.FS) {
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
	v, err := fsview.New(context.Background(), fsview.Config{Filer: s.GRPCAddr(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	srv := httptest.NewServer(Handler(v, log))
	t.Cleanup(srv.Close)
	return srv.URL, v
}

func do(t *testing.T, method, url, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func wantCode(t *testing.T, what string, got, want int) {
	t.Helper()
	if got != want {
		t.Fatalf("%s answered %d, want %d", what, got, want)
	}
}

const lockBody = `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope>` +
	`<D:locktype><D:write/></D:locktype></D:lockinfo>`

func TestWebDAVMethods(t *testing.T) {
	u, v := startDAV(t)
	c, _, _ := do(t, "MKCOL", u+"/dav", "")
	wantCode(t, "MKCOL", c, 201)
	c, _, _ = do(t, "MKCOL", u+"/dav", "")
	wantCode(t, "MKCOL of an existing collection", c, 405)
	c, _, _ = do(t, "MKCOL", u+"/none/sub", "")
	wantCode(t, "MKCOL without a parent", c, 409)
	c, _, _ = do(t, "PUT", u+"/dav/one", "content")
	wantCode(t, "PUT", c, 201)
	c, _, body := do(t, "PROPFIND", u+"/dav/", "", "Depth", "1")
	wantCode(t, "PROPFIND", c, 207)
	if !strings.Contains(body, "/dav/one") {
		t.Fatalf("PROPFIND does not list /dav/one: %s", body)
	}
	c, _, _ = do(t, "COPY", u+"/dav/one", "", "Destination", u+"/dav/two")
	wantCode(t, "COPY", c, 201)
	c, _, _ = do(t, "MOVE", u+"/dav/two", "", "Destination", u+"/dav/three")
	wantCode(t, "MOVE", c, 201)
	c, _, body = do(t, "GET", u+"/dav/three", "")
	if c != 200 || body != "content" {
		t.Fatalf("GET after COPY and MOVE: %d %q", c, body)
	}
	c, _, _ = do(t, "COPY", u+"/dav/one", "", "Destination", u+"/dav/three", "Overwrite", "F")
	wantCode(t, "COPY over an existing file with Overwrite: F", c, 412)
	// The view sees what WebDAV wrote.
	if a, err := v.Lookup(context.Background(), "/dav/three"); err != nil || a.Size != 7 {
		t.Fatalf("view: %+v %v", a, err)
	}
	c, h, _ := do(t, "LOCK", u+"/dav/three", lockBody, "Timeout", "Second-60", "Content-Type", "application/xml")
	wantCode(t, "LOCK", c, 200)
	token := h.Get("Lock-Token")
	if token == "" {
		t.Fatal("LOCK gave no Lock-Token")
	}
	c, _, _ = do(t, "PUT", u+"/dav/three", "other")
	wantCode(t, "PUT to a locked file without its token", c, 423)
	c, _, _ = do(t, "PUT", u+"/dav/three", "other", "If", "("+token+")")
	wantCode(t, "PUT with the lock token", c, 204)
	c, _, _ = do(t, "UNLOCK", u+"/dav/three", "", "Lock-Token", token)
	wantCode(t, "UNLOCK", c, 204)
	c, _, body = do(t, "PROPPATCH", u+"/dav/three", `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:x">`+
		`<D:set><D:prop><Z:color>red</Z:color></D:prop></D:set></D:propertyupdate>`, "Content-Type", "application/xml")
	if c != 207 || !strings.Contains(body, "200 OK") {
		t.Fatalf("PROPPATCH of a dead property: %d %s", c, body)
	}
	c, _, _ = do(t, "COPY", u+"/dav/one", "", "Destination", "http://elsewhere.example/dav/x")
	wantCode(t, "COPY to another host", c, 502)
	c, _, _ = do(t, "DELETE", u+"/dav", "")
	wantCode(t, "DELETE of a non-empty collection", c, 204)
	c, _, _ = do(t, "GET", u+"/dav/one", "")
	wantCode(t, "GET after DELETE", c, 404)
}

func TestWebDAVRefusesDotDot(t *testing.T) {
	u, _ := startDAV(t)
	do(t, "PUT", u+"/f", "x")
	req, _ := http.NewRequest("GET", u+"/f", nil)
	req.URL.Path = "/a/../../etc/passwd"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	wantCode(t, "GET with ..", resp.StatusCode, 400)
	c, _, _ := do(t, "MOVE", u+"/f", "", "Destination", u+"/a/../../g")
	wantCode(t, "MOVE to a Destination with ..", c, 400)
	c, _, _ = do(t, "GET", u+"/f", "")
	wantCode(t, "GET of the file a refused MOVE named", c, 200)
}

// TestWebDAVWithCadaver drives the server with a real WebDAV client.
func TestWebDAVWithCadaver(t *testing.T) {
	if _, err := exec.LookPath("cadaver"); err != nil {
		testutil.SkipOrFail(t, "cadaver missing (Debian package cadaver)")
	}
	u, v := startDAV(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "src.txt")
	if err := os.WriteFile(src, []byte("from cadaver"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := strings.Join([]string{
		"mkcol docs", "cd docs", "put " + src + " a.txt", "copy a.txt b.txt", "move b.txt c.txt",
		"lock c.txt", "unlock c.txt", "get c.txt " + filepath.Join(dir, "back.txt"), "ls", "quit", ""}, "\n")
	cmd := exec.Command("cadaver", u+"/")
	cmd.Stdin = strings.NewReader(script)
	cmd.Env = append(os.Environ(), "HOME="+dir) // no ~/.netrc or ~/.cadaverrc of the user
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cadaver: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "back.txt")); err != nil || string(b) != "from cadaver" {
		t.Fatalf("cadaver got back %q (%v)\n%s", b, err, out)
	}
	ctx := context.Background()
	for _, p := range []string{"/docs/a.txt", "/docs/c.txt"} {
		if _, err := v.Lookup(ctx, p); err != nil {
			t.Fatalf("%s after cadaver: %v\n%s", p, err, out)
		}
	}
	if _, err := v.Lookup(ctx, "/docs/b.txt"); err == nil {
		t.Fatalf("the moved b.txt is still there\n%s", out)
	}
	if strings.Contains(string(out), "failed") {
		t.Fatalf("a cadaver command failed:\n%s", out)
	}
}

// RFC 4918 corners litmus found: an If header's entity tags and Not
// conditions are evaluated (10.4), COPY onto a collection named with a
// trailing slash replaces it (9.8.4), and a body binding a prefix to the
// empty namespace name is refused and changes nothing.
func TestWebDAVIfConditionsAndCollectionOverwrite(t *testing.T) {
	u, v := startDAV(t)
	c, _, _ := do(t, "PUT", u+"/f", "v1")
	wantCode(t, "PUT", c, 201)
	_, h, _ := do(t, "HEAD", u+"/f", "")
	etag := h.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	for _, ifHdr := range []func(etag string) string{
		func(etag string) string { return "([" + etag + "])" },
		func(string) string { return "(Not <DAV:no-lock>)" },
		func(etag string) string { return `(["bogus"]) (Not <DAV:no-lock> [` + etag + `])` },
	} {
		c, h, _ = do(t, "PUT", u+"/f", "v2", "If", ifHdr(etag))
		wantCode(t, "PUT with If: "+ifHdr(etag), c, 204)
		etag = h.Get("ETag") // the PUT's answer tells the new one
	}
	for _, ifHdr := range []string{`(["bogus"])`, "(<DAV:no-lock>)", "(Not [" + etag + "])", `(Not <DAV:no-lock> ["bogus"])`} {
		c, _, _ = do(t, "PUT", u+"/f", "v3", "If", ifHdr)
		wantCode(t, "PUT with If: "+ifHdr, c, 412)
	}
	// A lock: its token with the right tag holds, with a wrong one not.
	c, h, _ = do(t, "LOCK", u+"/f", lockBody, "Timeout", "Second-60", "Content-Type", "application/xml")
	wantCode(t, "LOCK", c, 200)
	token := h.Get("Lock-Token")
	_, h, _ = do(t, "HEAD", u+"/f", "")
	etag = h.Get("ETag")
	c, _, _ = do(t, "PUT", u+"/f", "v4", "If", "("+token+` ["bogus"]) (Not <DAV:no-lock> ["bogus"])`)
	wantCode(t, "PUT with the lock token and a wrong tag", c, 412)
	c, _, _ = do(t, "PUT", u+"/f", "v4", "If", "(Not <DAV:no-lock>)")
	wantCode(t, "PUT to a locked file, its token not submitted", c, 423)
	// Refused before its body is read: answered at once, the connection closed
	// (else net/http would wait for the body a client holds back until
	// "100 Continue").
	head := rawAnswer(t, strings.TrimPrefix(u, "http://"), "PUT /f HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n")
	if !strings.HasPrefix(head, "HTTP/1.1 423 ") || !strings.Contains(head, "\r\nConnection: close\r\n") {
		t.Fatalf("PUT to a locked file waiting for 100 Continue: %q", head)
	}
	c, _, _ = do(t, "PUT", u+"/f", "v4", "If", "("+token+" ["+etag+"]) (Not <DAV:no-lock> ["+etag+"])")
	wantCode(t, "PUT with the lock token and the tag", c, 204)
	c, _, _ = do(t, "UNLOCK", u+"/f", "", "Lock-Token", token)
	wantCode(t, "UNLOCK", c, 204)

	c, _, _ = do(t, "MKCOL", u+"/coll/", "")
	wantCode(t, "MKCOL", c, 201)
	c, _, _ = do(t, "PUT", u+"/coll/child", "x")
	wantCode(t, "PUT", c, 201)
	c, _, _ = do(t, "COPY", u+"/f", "", "Destination", u+"/coll/", "Overwrite", "T")
	wantCode(t, "COPY onto a collection with Overwrite: T", c, 204)
	if a, err := v.Lookup(context.Background(), "/coll"); err != nil || a.Mode.IsDir() || a.Size != 2 {
		t.Fatalf("/coll after the COPY: %+v %v", a, err)
	}

	c, _, _ = do(t, "PROPPATCH", u+"/f", `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="">`+
		`<D:set><D:prop><Z:color>red</Z:color></D:prop></D:set></D:propertyupdate>`, "Content-Type", "application/xml")
	wantCode(t, "PROPPATCH binding a prefix to the empty namespace", c, 400)
	c, _, _ = do(t, "PROPFIND", u+"/f", `<?xml version="1.0"?><D:propfind xmlns:D="DAV:" xmlns:bar=""><D:prop><bar:x/></D:prop></D:propfind>`, "Depth", "0")
	wantCode(t, "PROPFIND binding a prefix to the empty namespace", c, 400)
	if xs, err := v.ListXattr(context.Background(), "/f"); err != nil || len(xs) != 0 {
		t.Fatalf("xattrs of /f after the refused PROPPATCH: %v %v", xs, err)
	}
}
