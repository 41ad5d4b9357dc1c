package filerserver

import (
	"strings"
	"sync"
	"testing"
)

// TestHTTPConditionalPut is the compare-and-swap of whole-file writes:
// If-None-Match: * creates only, If-Match replaces only the version read;
// a failed precondition is 412 and leaves the file as it was.
func TestHTTPConditionalPut(t *testing.T) {
	_, base := startFake(t, 1000)
	u := base + "/cas/f.json"
	resp, body := do(t, "PUT", u, strings.NewReader("v1"), "If-Match", "*")
	want(t, resp, body, 412) // nothing to match yet
	resp, body = do(t, "PUT", u, strings.NewReader("v1"), "If-None-Match", "*")
	want(t, resp, body, 201)
	e1 := resp.Header.Get("Etag")
	resp, body = do(t, "PUT", u, strings.NewReader("other"), "If-None-Match", "*")
	want(t, resp, body, 412)
	resp, body = do(t, "PUT", u, strings.NewReader("v2"), "If-Match", e1)
	want(t, resp, body, 201)
	e2 := resp.Header.Get("Etag")
	// A writer that read v1 is refused now.
	resp, body = do(t, "PUT", u, strings.NewReader("stale"), "If-Match", e1)
	want(t, resp, body, 412)
	resp, body = do(t, "GET", u, nil)
	if string(body) != "v2" || resp.Header.Get("Etag") != e2 {
		t.Fatalf("after a refused write: %q %s, want v2 %s", body, resp.Header.Get("Etag"), e2)
	}
	resp, body = do(t, "PUT", u, strings.NewReader("v3"), "If-Match", "*")
	want(t, resp, body, 201)
	for _, bad := range [][]string{
		{"If-Match", `W/"abc"`}, {"If-Match", `"a", "b"`}, {"If-Match", `""`}, {"If-None-Match", `"abc"`},
	} {
		resp, body = do(t, "PUT", u, strings.NewReader("bad"), bad...)
		want(t, resp, body, 400)
	}
	resp, body = do(t, "PUT", u+"?op=append", strings.NewReader("x"), "If-Match", "*")
	want(t, resp, body, 400)
	resp, body = do(t, "GET", u, nil)
	if string(body) != "v3" {
		t.Fatalf("refused writes changed the file: %q", body)
	}

	// Concurrent read-modify-write editors with retries lose no edit.
	do(t, "PUT", base+"/cas/list", strings.NewReader(""))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				resp, cur := do(t, "GET", base+"/cas/list", nil)
				r, b := do(t, "PUT", base+"/cas/list", strings.NewReader(string(cur)+string(rune('a'+i))), "If-Match", resp.Header.Get("Etag"))
				if r.StatusCode == 201 {
					return
				}
				if r.StatusCode != 412 {
					t.Errorf("PUT: %d %s", r.StatusCode, b)
					return
				}
			}
		}()
	}
	wg.Wait()
	if _, b := do(t, "GET", base+"/cas/list", nil); len(b) != 8 {
		t.Fatalf("8 editors, the file holds %q", b)
	}
}
