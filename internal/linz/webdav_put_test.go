package linz

import (
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/testutil"
)

// TestWebDAVPutIsAtomic is the minimized form of the violation the WebDAV
// register test found: while a PUT over an existing file is still sending
// its body, a GET must read the old content whole, never an empty file nor
// the part of the new content sent so far. Today it reads either: x/net/webdav's
// PUT opens the file with O_TRUNC, and the filer view commits the truncation
// at once (fsview's truncate) before the new content is written; and a GET
// through the same server reads the open file's write buffer (fsview shares
// one file per path among its handles, as a local file system does), so it
// sees bytes of a PUT that has not finished. Known bug, run with
// KELP_LINZ_KNOWN_BUGS=1 (see docs/consistency.md).
func TestWebDAVPutIsAtomic(t *testing.T) {
	if os.Getenv("KELP_LINZ_KNOWN_BUGS") != "1" {
		t.Skip("known bug: WebDAV PUT exposes an empty file and its partial body while it runs; KELP_LINZ_KNOWN_BUGS=1 runs it")
	}
	r := startRig(t)
	r.startWebDAV(t)
	s := &filerKV{base: "http://" + r.webdav.Addr(), hc: &http.Client{}, dir: "/"}
	if err := s.Put("f", "old content"); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	put := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest("PUT", s.base+"/f", pr)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		put <- err
	}()
	if _, err := pw.Write([]byte("new ")); err != nil { // the server has the request and reads its body
		t.Fatal(err)
	}
	var seen string
	// A GET while the PUT waits for the rest of its body: every read must be
	// the old content. (Bounded: this checks that something does not happen.)
	broken := testutil.Eventually(time.Second, func() bool {
		v, err := s.Get("f")
		seen = v
		return err == nil && v != "old content"
	})
	pw.Write([]byte("content"))
	pw.Close()
	if err := <-put; err != nil {
		t.Fatal(err)
	}
	if broken {
		t.Errorf("a GET during an unfinished PUT read %q, want %q", seen, "old content")
	}
	if v, err := s.Get("f"); err != nil || v != "new content" {
		t.Fatalf("after the PUT: %q %v", v, err)
	}
}
