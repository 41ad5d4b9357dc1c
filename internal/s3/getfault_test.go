package s3

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/chunk/chunktest"
	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/filerserver"
)

// A GET whose first chunk cannot be fetched is answered as an S3 error
// with the cluster's status (503), not as a 200 or 206 that stops short;
// the object reads again once the fault is gone.
func TestGetFirstChunkUnreadableIsAnError(t *testing.T) {
	blobs := chunktest.New()
	e := startEnvFiler(t, chunkSize, func(c *filerserver.Config) { c.Blobs = blobs }, nil)
	e.mkBucket("bkt")
	data := bytes.Repeat([]byte("0123456789"), 30_000) // several chunks
	if resp, body := e.raw("PUT", "/bkt/o", data, nil); resp.StatusCode != 200 {
		t.Fatalf("PUT: %d %s", resp.StatusCode, body)
	}
	blobs.FailOpen = func(string) error { return client.ErrNoAnswer }
	for _, rg := range []string{"", "bytes=0-299", "bytes=150000-"} {
		hdr := map[string]string{}
		if rg != "" {
			hdr["Range"] = rg
		}
		resp, body := e.raw("GET", "/bkt/o", nil, hdr)
		if resp.StatusCode != 503 || !strings.Contains(string(body), "<Code>") ||
			resp.Header.Get("Content-Range") != "" || resp.Header.Get("ETag") != "" {
			t.Fatalf("GET %q with the chunks unreadable: %d %v %q", rg, resp.StatusCode, resp.Header, body)
		}
	}
	blobs.FailOpen = nil
	resp, body := e.raw("GET", "/bkt/o", nil, map[string]string{"Range": "bytes=0-299"})
	if resp.StatusCode != 206 || !bytes.Equal(body, data[:300]) {
		t.Fatalf("GET after the fault: %d, %d bytes", resp.StatusCode, len(body))
	}
}
