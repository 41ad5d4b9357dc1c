package filerserver

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/chunk/chunktest"
	"github.com/kelpfs/kelp/internal/client"
)

// startFake runs a filer on an embedded store with in-memory blobs.
func startFake(t *testing.T, chunkSize int) (*Server, string) {
	t.Helper()
	return startFakeOn(t, chunktest.New(), chunkSize)
}

// startFakeOn is startFake on blobs the test can reach (to inject faults).
func startFakeOn(t *testing.T, blobs *chunktest.Mem, chunkSize int) (*Server, string) {
	t.Helper()
	s, err := New(Config{Dir: t.TempDir(), Blobs: blobs, ChunkSize: chunkSize, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return s, "http://" + s.Addr()
}

func do(t *testing.T, method, url string, body io.Reader, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func want(t *testing.T, resp *http.Response, body []byte, code int) {
	t.Helper()
	if resp.StatusCode != code {
		t.Fatalf("%s %s: %d %s, want %d", resp.Request.Method, resp.Request.URL, resp.StatusCode, body, code)
	}
}

func TestHTTPPutGetSizesRangeConditional(t *testing.T) {
	const cs = 1000
	_, base := startFake(t, cs)
	for _, n := range []int{0, 1, cs - 1, cs, cs + 1, 4*cs + 5} {
		data := bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]
		url := fmt.Sprintf("%s/files/f%d.txt", base, n)
		resp, body := do(t, "PUT", url, bytes.NewReader(data))
		want(t, resp, body, 201)
		sum := md5.Sum(data)
		etag := `"` + hex.EncodeToString(sum[:]) + `"`
		if resp.Header.Get("Etag") != etag {
			t.Fatalf("PUT etag %s want %s", resp.Header.Get("Etag"), etag)
		}
		resp, body = do(t, "GET", url, nil)
		want(t, resp, body, 200)
		if !bytes.Equal(body, data) || resp.Header.Get("Etag") != etag || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
			t.Fatalf("GET f%d: %d bytes, etag %s, type %s", n, len(body), resp.Header.Get("Etag"), resp.Header.Get("Content-Type"))
		}
		resp, body = do(t, "GET", url, nil, "If-None-Match", etag)
		want(t, resp, body, 304)
		resp, body = do(t, "HEAD", url, nil)
		want(t, resp, body, 200)
		if resp.ContentLength != int64(n) {
			t.Fatalf("HEAD length %d", resp.ContentLength)
		}
		if n > 10 {
			lo, hi := n/3, n-2
			resp, body = do(t, "GET", url, nil, "Range", fmt.Sprintf("bytes=%d-%d", lo, hi))
			want(t, resp, body, 206)
			if !bytes.Equal(body, data[lo:hi+1]) {
				t.Fatalf("range %d-%d differs", lo, hi)
			}
		}
		resp, body = do(t, "GET", url, nil, "If-Modified-Since", resp.Header.Get("Last-Modified"))
		want(t, resp, body, 304)
	}
}

func TestHTTPDirectoriesListingDelete(t *testing.T) {
	_, base := startFake(t, 0)
	resp, body := do(t, "PUT", base+"/d/", nil)
	want(t, resp, body, 201)
	resp, body = do(t, "POST", base+"/d/sub?op=mkdir", nil)
	want(t, resp, body, 201)
	for i := 0; i < 5; i++ {
		resp, body = do(t, "PUT", fmt.Sprintf("%s/d/f%d", base, i), strings.NewReader("x"))
		want(t, resp, body, 201)
	}
	var names []string
	last := ""
	for {
		resp, body = do(t, "GET", base+"/d/?limit=2&lastFileName="+last, nil, "Accept", "application/json")
		want(t, resp, body, 200)
		var l listing
		if err := json.Unmarshal(body, &l); err != nil {
			t.Fatal(err)
		}
		for _, e := range l.Entries {
			names = append(names, fmt.Sprintf("%s:%v:%d", e.Name, e.IsDir, e.Size))
		}
		last = l.LastFileName
		if !l.More {
			break
		}
	}
	if fmt.Sprint(names) != "[f0:false:1 f1:false:1 f2:false:1 f3:false:1 f4:false:1 sub:true:0]" {
		t.Fatalf("listing %v", names)
	}
	resp, body = do(t, "GET", base+"/d/", nil)
	want(t, resp, body, 200)
	if !strings.Contains(string(body), `<a href="/d/sub/">sub/</a>`) || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("HTML listing: %s", body)
	}
	resp, body = do(t, "DELETE", base+"/d", nil)
	want(t, resp, body, 409)
	resp, body = do(t, "DELETE", base+"/d?recursive=true", nil)
	want(t, resp, body, 204)
	resp, body = do(t, "GET", base+"/d/f1", nil)
	want(t, resp, body, 404)
	var e map[string]string
	if json.Unmarshal(body, &e) != nil || e["error"] == "" {
		t.Fatalf("404 body %s", body)
	}
}

func TestHTTPBadInput(t *testing.T) {
	_, base := startFake(t, 0)
	for _, p := range []string{"/a/../b", "/a/./b", "/a%00b", "/" + strings.Repeat("n", 1025)} {
		resp, body := do(t, "PUT", base+p, strings.NewReader("x"))
		want(t, resp, body, 400)
		if !strings.Contains(string(body), "invalid path") {
			t.Fatalf("%s: body %s", p, body)
		}
	}
	resp, body := do(t, "PUT", base+"/dir/inner/f", strings.NewReader("x"))
	want(t, resp, body, 201)
	resp, body = do(t, "POST", base+"/dir/inner/moved?op=rename&from=/dir", nil)
	want(t, resp, body, 400)
	resp, body = do(t, "POST", base+"/x?op=frobnicate", nil)
	want(t, resp, body, 400)
	resp, body = do(t, "PUT", base+"/dir/inner/f/below", strings.NewReader("x"))
	want(t, resp, body, 409)
	resp, body = do(t, "GET", base+"/healthz", nil)
	want(t, resp, body, 200)
}

func TestHTTPRenameAppendOffsetMultipart(t *testing.T) {
	_, base := startFake(t, 4)
	resp, body := do(t, "PUT", base+"/src/a.bin", strings.NewReader("hello"), "X-Kelp-Meta-Color", "blue")
	want(t, resp, body, 201)
	resp, body = do(t, "POST", base+"/dst/b.bin?op=rename&from=/src/a.bin", nil)
	want(t, resp, body, 200)
	resp, body = do(t, "GET", base+"/src/a.bin", nil)
	want(t, resp, body, 404)
	resp, body = do(t, "POST", base+"/dst/b.bin?op=append", strings.NewReader(", world"))
	want(t, resp, body, 201)
	resp, body = do(t, "PUT", base+"/dst/b.bin?offset=7", strings.NewReader("W"))
	want(t, resp, body, 201)
	resp, body = do(t, "GET", base+"/dst/b.bin", nil)
	want(t, resp, body, 200)
	if string(body) != "hello, World" || resp.Header.Get("X-Kelp-Meta-Color") != "blue" {
		t.Fatalf("got %q meta %q", body, resp.Header.Get("X-Kelp-Meta-Color"))
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	mw.WriteField("comment", "ignored")
	fw, _ := mw.CreateFormFile("file", "up.txt")
	fw.Write([]byte("multipart body"))
	mw.Close()
	resp, body = do(t, "POST", base+"/dst/", &buf, "Content-Type", mw.FormDataContentType())
	want(t, resp, body, 201)
	resp, body = do(t, "GET", base+"/dst/up.txt", nil)
	want(t, resp, body, 200)
	if string(body) != "multipart body" {
		t.Fatalf("multipart upload: %q", body)
	}
}

// Random requests against the HTTP API: paths, operations, headers and
// bodies a confused client could send. Each gets an answer (a connection
// closed without one is a crashed handler), none a 5xx.
func TestHTTPRandomRequestsNeverFail500(t *testing.T) {
	_, base := startFake(t, 1<<10)
	resp, body := do(t, "PUT", base+"/keep/file.txt", strings.NewReader("precious"))
	want(t, resp, body, http.StatusCreated)
	r := rand.New(rand.NewPCG(3, 4))
	methods := []string{"GET", "PUT", "POST", "DELETE", "HEAD", "PATCH"}
	paths := []string{"/", "/keep", "/keep/", "/keep/file.txt", "/keep/file.txt/under", "/a/b/c", "/%2e%2e/x", "/a//b",
		"/" + strings.Repeat("n", 300), "/keep/file.txt/", "/new"}
	queries := []string{"", "op=mkdir", "op=rename", "op=rename&from=/keep/file.txt", "op=rename&from=/", "op=rename&from=/keep",
		"op=append", "op=bogus", "op=truncate&size=5", "op=truncate&size=-2", "op=truncate", "offset=-1", "offset=abc", "offset=99999999999", "recursive=true", "recursive=maybe",
		"limit=-3", "limit=abc", "lastFileName=%00", "mode=999999", "mode=-1", "mode=abc"}
	headers := [][]string{nil, {"Range", "bytes=5-1"}, {"Range", "bytes=x"}, {"Accept", "application/json"},
		{"Content-Type", "multipart/form-data; boundary=zz"}, {"Content-Type", "multipart/form-data"},
		{"If-Match", `"nope"`}, {"If-None-Match", "*"}, {"X-Kelp-Meta-" + strings.Repeat("k", 100), "v"}}
	bodies := []string{"", "x", "--zz\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabc", strings.Repeat("z", 5000)}
	for i := range 500 {
		method, path := methods[r.IntN(len(methods))], paths[r.IntN(len(paths))]
		if q := queries[r.IntN(len(queries))]; q != "" {
			path += "?" + q
		}
		hdr := headers[r.IntN(len(headers))]
		req, err := http.NewRequest(method, base+path, strings.NewReader(bodies[r.IntN(len(bodies))]))
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j+1 < len(hdr); j += 2 {
			req.Header.Set(hdr[j], hdr[j+1])
		}
		what := fmt.Sprintf("request %d: %s %s %v", i, method, path, hdr)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		// A sparse file may be huge (offset=99999999999): read a little.
		out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s: reading the answer: %v", what, err)
		}
		if resp.StatusCode >= 500 {
			t.Errorf("%s: %d %.300s", what, resp.StatusCode, out)
		}
	}
}

func TestHTTPTruncate(t *testing.T) {
	_, base := startFake(t, 1<<10)
	resp, body := do(t, "PUT", base+"/t.bin", strings.NewReader(strings.Repeat("a", 3000)))
	want(t, resp, body, http.StatusCreated)
	resp, body = do(t, "POST", base+"/t.bin?op=truncate&size=1200", nil)
	want(t, resp, body, http.StatusOK)
	resp, body = do(t, "POST", base+"/t.bin?op=truncate&size=1500", nil)
	want(t, resp, body, http.StatusOK)
	resp, body = do(t, "GET", base+"/t.bin", nil)
	want(t, resp, body, http.StatusOK)
	if string(body) != strings.Repeat("a", 1200)+string(make([]byte, 300)) {
		t.Fatalf("after truncating: %d bytes", len(body))
	}
	for _, q := range []string{"op=truncate", "op=truncate&size=-1", "op=truncate&size=x"} {
		resp, body = do(t, "POST", base+"/t.bin?"+q, nil)
		want(t, resp, body, http.StatusBadRequest)
	}
	resp, body = do(t, "POST", base+"/nothing?op=truncate&size=1", nil)
	want(t, resp, body, http.StatusNotFound)
}

func TestHTTPQuota(t *testing.T) {
	_, base := startFake(t, 0)
	resp, body := do(t, "PUT", base+"/vol/", nil)
	want(t, resp, body, http.StatusCreated)
	resp, body = do(t, "POST", base+"/vol?op=quota&bytes=10&files=5", nil)
	want(t, resp, body, http.StatusOK)
	resp, body = do(t, "PUT", base+"/vol/a", strings.NewReader("0123456789"))
	want(t, resp, body, http.StatusCreated)
	resp, body = do(t, "PUT", base+"/vol/b", strings.NewReader("x"))
	want(t, resp, body, http.StatusInsufficientStorage)
	resp, body = do(t, "GET", base+"/vol/a", nil)
	want(t, resp, body, http.StatusOK)
	if string(body) != "0123456789" {
		t.Fatalf("stored file after a refused write: %q", body)
	}
	resp, body = do(t, "GET", base+"/vol?op=quota", nil)
	want(t, resp, body, http.StatusOK)
	var q quotaJSON
	if err := json.Unmarshal(body, &q); err != nil || q.UsedBytes != 10 || q.UsedFiles != 1 || q.MaxBytes != 10 || q.MaxFiles != 5 {
		t.Fatalf("quota: %s %v", body, err)
	}
	resp, body = do(t, "POST", base+"/vol?op=quota&bytes=-1", nil)
	want(t, resp, body, http.StatusBadRequest)
	resp, body = do(t, "POST", base+"/vol?op=quota&remove=true", nil)
	want(t, resp, body, http.StatusNoContent)
	resp, body = do(t, "GET", base+"/vol?op=quota", nil)
	want(t, resp, body, http.StatusNotFound)
	resp, body = do(t, "PUT", base+"/vol/b", strings.NewReader("x"))
	want(t, resp, body, http.StatusCreated)
}

// A GET whose content cannot be read answers the read's error, not a 200
// or 206 whose body stops short.
func TestHTTPGetUnreadableContentIsAnError(t *testing.T) {
	blobs := chunktest.New()
	_, base := startFakeOn(t, blobs, 1000)
	url := base + "/f.bin"
	data := bytes.Repeat([]byte("x"), 4005)
	resp, body := do(t, "PUT", url, bytes.NewReader(data))
	want(t, resp, body, 201)
	blobs.FailOpen = func(string) error { return client.ErrNoAnswer }
	for _, rg := range []string{"", "bytes=0-299", "bytes=2500-"} {
		resp, body = do(t, "GET", url, nil, "Range", rg)
		want(t, resp, body, 503)
		if resp.Header.Get("Content-Range") != "" || !strings.Contains(string(body), "error") {
			t.Fatalf("range %q: %v %q", rg, resp.Header, body)
		}
	}
	resp, body = do(t, "HEAD", url, nil)
	want(t, resp, body, 200)
	blobs.FailOpen = nil
	resp, body = do(t, "GET", url, nil, "Range", "bytes=0-299")
	want(t, resp, body, 206)
	if !bytes.Equal(body, data[:300]) {
		t.Fatalf("after the fault: %d bytes", len(body))
	}
}
