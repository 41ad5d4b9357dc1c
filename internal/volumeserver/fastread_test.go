package volumeserver_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/testcluster"
)

// exchange writes reqs on a fresh connection to addr in one write
// (pipelined) and reads one answer per method given.
func exchange(t *testing.T, addr, reqs string, methods ...string) []reply {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, reqs); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var out []reply
	for _, m := range methods {
		resp, err := http.ReadResponse(br, &http.Request{Method: m})
		if err != nil {
			t.Fatalf("answer %d of %d: %v", len(out)+1, len(methods), err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("answer %d body: %v", len(out)+1, err)
		}
		resp.Body.Close()
		out = append(out, reply{resp.StatusCode, resp.Header, b})
	}
	return out
}

func sameAnswer(t *testing.T, what string, fast, slow reply) {
	t.Helper()
	fast.header.Del("Date")
	slow.header.Del("Date")
	if fast.status != slow.status || !bytes.Equal(fast.body, slow.body) || !maps.EqualFunc(fast.header, slow.header, slices.Equal) {
		t.Errorf("%s: fast path %d %v (%d bytes), net/http %d %v (%d bytes)", what,
			fast.status, fast.header, len(fast.body), slow.status, slow.header, len(slow.body))
	}
}

// TestFastReadSameAsNetHTTP: the volume server's fast read path
// (fastread.go) answers exactly what net/http's handler answers, keeps the
// connection alive across pipelined requests, and hands a connection to
// net/http, unread bytes included, at the first request it does not take.
func TestFastReadSameAsNetHTTP(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}}})
	cl, err := client.New(client.Config{Masters: c.MasterAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	put := func(query string, body []byte, ctype string) (addr, path string) {
		t.Helper()
		a, err := cl.Assign(context.Background(), client.AssignRequest{})
		if err != nil {
			t.Fatal(err)
		}
		r := do(t, "PUT", "http://"+a.URL+"/"+a.FID.String()+query, bytes.NewReader(body), map[string]string{"Content-Type": ctype})
		if r.status != http.StatusCreated {
			t.Fatalf("PUT: %d %s", r.status, r.body)
		}
		return a.URL, "/" + a.FID.String()
	}
	small := []byte("0123456789abcdefghijklmnopqrstuvwxyz")
	addr, named := put("?name=report%20one.pdf", small, "")
	_, typed := put("", small, "text/plain; charset=utf-8")
	_, mid := put("", bytes.Repeat([]byte("m"), 100<<10), "") // sent uncopied (writev)
	_, large := put("", bytes.Repeat([]byte("L"), 2<<20), "") // a large needle: net/http's
	get := func(method, path string, extra ...string) string {
		return method + " " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nUser-Agent: kelp-test\r\nAccept-Encoding: gzip\r\n" +
			strings.Join(extra, "") + "\r\n"
	}
	viaNetHTTP := "X-Test: net/http\r\n" // an unknown header: the request goes to net/http

	for _, path := range []string{named, typed, mid, large} {
		for _, m := range []string{"GET", "HEAD"} {
			fast := exchange(t, addr, get(m, path), m)
			slow := exchange(t, addr, get(m, path, viaNetHTTP), m)
			sameAnswer(t, m+" "+path, fast[0], slow[0])
			if fast[0].status != http.StatusOK {
				t.Errorf("%s %s: %d", m, path, fast[0].status)
			}
		}
	}

	// Pipelined: plain reads, then a range (net/http from there on), then
	// plain reads again, all on one connection.
	got := exchange(t, addr, get("GET", named)+get("HEAD", typed)+get("GET", mid)+
		get("GET", named, "Range: bytes=0-3\r\n")+get("GET", typed)+get("GET", "/9999,0123456789abcdef"),
		"GET", "HEAD", "GET", "GET", "GET", "GET")
	want := []struct {
		status int
		body   string
	}{{200, string(small)}, {200, ""}, {200, strings.Repeat("m", 100<<10)}, {206, "0123"}, {200, string(small)}, {404, ""}}
	for i, w := range want {
		if got[i].status != w.status || (w.body != "" && string(got[i].body) != w.body) {
			t.Errorf("pipelined answer %d: %d %q, want %d %q", i+1, got[i].status, got[i].body, w.status, w.body)
		}
	}

	// A connection net/http took (a write) comes back to the fast path
	// after a plain read and goes to net/http again for the next write.
	var puts []string
	for range 2 {
		a, err := cl.Assign(context.Background(), client.AssignRequest{})
		if err != nil {
			t.Fatal(err)
		}
		puts = append(puts, "PUT /"+a.FID.String()+" HTTP/1.1\r\nHost: "+addr+"\r\nContent-Length: 5\r\n\r\nhello")
	}
	got = exchange(t, addr, puts[0]+get("GET", named)+get("GET", typed)+puts[1]+get("GET", mid)+get("GET", named),
		"PUT", "GET", "GET", "PUT", "GET", "GET")
	for i, w := range []struct {
		status int
		body   string
	}{{201, ""}, {200, string(small)}, {200, string(small)}, {201, ""}, {200, strings.Repeat("m", 100<<10)}, {200, string(small)}} {
		if got[i].status != w.status || (w.body != "" && string(got[i].body) != w.body) {
			t.Errorf("mixed answer %d: %d %q, want %d %q", i+1, got[i].status, got[i].body, w.status, w.body)
		}
	}

	// What the fast path does not answer itself still gets net/http's answer.
	for _, tc := range []struct {
		name, req string
		status    int
	}{
		{"unknown needle", get("GET", "/1,00000000ffffffff"), http.StatusNotFound},
		{"bad file id", get("GET", "/zz"), http.StatusBadRequest},
		{"no Host", "GET " + named + " HTTP/1.1\r\n\r\n", http.StatusBadRequest},
		{"bad Host", "GET " + named + " HTTP/1.1\r\nHost: a b\r\n\r\n", http.StatusBadRequest},
		{"query", get("GET", named+"?dl=true"), http.StatusOK},
		{"status page", get("GET", "/status"), http.StatusOK},
		{"HTTP/1.0", "GET " + named + " HTTP/1.0\r\n\r\n", http.StatusOK},
		{"If-None-Match", get("GET", named, "If-None-Match: *\r\n"), http.StatusNotModified},
	} {
		if r := exchange(t, addr, tc.req, "GET"); r[0].status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, r[0].status, r[0].body, tc.status)
		}
	}
	if r := exchange(t, addr, get("GET", named+"?dl=true"), "GET"); !strings.HasPrefix(r[0].header.Get("Content-Disposition"), "attachment") {
		t.Errorf("dl=true: Content-Disposition %q", r[0].header.Get("Content-Disposition"))
	}
}

// Ranges and whole reads of a large needle on a connection the fast path
// handed to net/http (whose answers countWriter watches, to take the
// connection back) come whole and right, copied through ReadFrom, and
// the connection still serves the requests after them.
func TestLargeNeedleRangesOnAReclaimedConnection(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}}})
	cl, err := client.New(client.Config{Masters: c.MasterAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	put := func(body []byte) (addr, path string) {
		t.Helper()
		a, err := cl.Assign(context.Background(), client.AssignRequest{})
		if err != nil {
			t.Fatal(err)
		}
		r := do(t, "PUT", "http://"+a.URL+"/"+a.FID.String(), bytes.NewReader(body), nil)
		if r.status != http.StatusCreated {
			t.Fatalf("PUT: %d %s", r.status, r.body)
		}
		return a.URL, "/" + a.FID.String()
	}
	data := make([]byte, 3<<20+12345)
	for i := range data {
		data[i] = byte(i*7 + i>>13)
	}
	small := []byte("small needle")
	addr, large := put(data)
	_, named := put(small)
	get := func(path string, extra ...string) string {
		return "GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\n" + strings.Join(extra, "") + "\r\n"
	}
	got := exchange(t, addr, get(large, "Range: bytes=0-1048575\r\n")+get(large, "Range: bytes=1048576-3158015\r\n")+
		get(named)+get(large, "Range: bytes=3000000-\r\n")+get(large)+get(named),
		"GET", "GET", "GET", "GET", "GET", "GET")
	for i, w := range []struct {
		status int
		body   []byte
	}{{206, data[:1<<20]}, {206, data[1<<20 : 3158016]}, {200, small}, {206, data[3000000:]}, {200, data}, {200, small}} {
		if got[i].status != w.status || !bytes.Equal(got[i].body, w.body) {
			t.Errorf("answer %d: %d with %d bytes, want %d with %d bytes (or other bytes)", i+1, got[i].status, len(got[i].body), w.status, len(w.body))
		}
	}
}
