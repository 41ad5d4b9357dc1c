package client_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/client"
)

// echo answers a PUT with the body it read and its length as a header, and a
// GET with size bytes of a pattern, written in pieces as a volume server does.
func echoHandler(t *testing.T) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /echo", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
		}
		if r.RequestURI != "/echo?x=1" || r.Host != "vol:8080" || r.RemoteAddr == "" {
			t.Errorf("server-side request: uri %q host %q remote %q", r.RequestURI, r.Host, r.RemoteAddr)
		}
		w.Header().Set("X-Len", strconv.Itoa(len(b)))
		w.WriteHeader(http.StatusCreated)
		w.Write(b)
	})
	mux.HandleFunc("GET /big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(3<<20))
		for i := 0; i < 3<<20; i += 32 << 10 {
			if _, err := w.Write(bytes.Repeat([]byte{byte(i >> 15)}, 32<<10)); err != nil {
				return // the caller went away
			}
		}
	})
	mux.HandleFunc("HEAD /big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5")
		w.Write([]byte("dropped"))
	})
	mux.HandleFunc("GET /panic", func(w http.ResponseWriter, r *http.Request) { panic("boom") })
	mux.HandleFunc("GET /nothing", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("PUT /early", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		time.Sleep(50 * time.Millisecond)
		io.Copy(io.Discard, r.Body)
		earlyDone.Store(true)
	})
	return mux
}

var earlyDone atomic.Bool

func TestLoopbackServesInProcess(t *testing.T) {
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("remote")) }))
	defer remote.Close()
	hc := &http.Client{Transport: &client.Loopback{Handlers: map[string]http.Handler{"vol:8080": echoHandler(t)}}}

	req, _ := http.NewRequest("PUT", "http://vol:8080/echo?x=1", strings.NewReader("hello"))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp.Body); resp.StatusCode != 201 || string(got) != "hello" || resp.Header.Get("X-Len") != "5" {
		t.Fatalf("PUT: %d %q %v", resp.StatusCode, got, resp.Header)
	}

	resp, err = hc.Get("http://vol:8080/big")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp.Body); len(got) != 3<<20 || resp.ContentLength != 3<<20 || got[len(got)-1] != byte((3<<20-1)>>15) {
		t.Fatalf("GET big: %d bytes, length %d", len(got), resp.ContentLength)
	}

	// A caller that stops reading ends the handler instead of blocking it.
	resp, err = hc.Get("http://vol:8080/big")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Read(make([]byte, 10))
	resp.Body.Close()

	resp, err = hc.Head("http://vol:8080/big")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp.Body); len(got) != 0 || resp.ContentLength != 5 {
		t.Fatalf("HEAD: %q, length %d", got, resp.ContentLength)
	}

	resp, err = hc.Get("http://vol:8080/nothing")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp.Body); resp.StatusCode != 200 || len(got) != 0 {
		t.Fatalf("empty answer: %d %q", resp.StatusCode, got)
	}

	// A handler that answers before reading the body is done with it by
	// the time the caller has closed the response.
	req, _ = http.NewRequest("PUT", "http://vol:8080/early", strings.NewReader("body"))
	resp, err = hc.Do(req)
	if err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("early answer: %v %v", resp, err)
	}
	resp.Body.Close()
	if !earlyDone.Load() {
		t.Fatal("Close returned while the handler was still reading the request body")
	}

	if _, err := hc.Get("http://vol:8080/panic"); !errors.Is(err, client.ErrHandlerPanic) {
		t.Fatalf("panicking handler: %v", err)
	}

	resp, err = hc.Get(remote.URL)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp.Body); string(got) != "remote" {
		t.Fatalf("other hosts go over the network: %q", got)
	}
}

// bufferSpy is a source without WriteTo that records the buffers it is
// asked to fill.
type bufferSpy struct {
	left int
	seen [][]byte
}

func (s *bufferSpy) Read(p []byte) (int, error) {
	if s.left == 0 {
		return 0, io.EOF
	}
	s.seen = append(s.seen, p)
	n := min(len(p), s.left)
	for i := range p[:n] {
		p[i] = byte(s.left - i)
	}
	s.left -= n
	return n, nil
}

// A handler's io.Copy of a file (http.ServeContent's) fills the caller's
// buffer itself: no intermediate buffer, and pieces as large as the
// caller's reads (io.Pipe gave 32 KiB pieces through io.Copy's buffer).
func TestLoopbackCopiesIntoCallersBuffer(t *testing.T) {
	const size = 1<<20 + 123
	spy := &bufferSpy{left: size}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		if _, err := io.Copy(w, spy); err != nil {
			t.Error(err)
		}
	})
	c := &http.Client{Transport: &client.Loopback{Handlers: map[string]http.Handler{"vol:1": h}}}
	resp, err := c.Get("http://vol:1/x")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256<<10)
	got := 0
	for {
		n, err := resp.Body.Read(buf)
		for i := range buf[:n] {
			if buf[i] != byte(size-got-i) {
				t.Fatalf("byte %d: %d, want %d", got+i, buf[i], byte(size-got-i))
			}
		}
		got += n
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	resp.Body.Close()
	if got != size {
		t.Fatalf("read %d bytes, want %d", got, size)
	}
	for i, p := range spy.seen {
		if &p[0] != &buf[0] {
			t.Fatalf("source read %d went to a buffer of %d bytes, not the caller's", i, len(p))
		}
	}
}

// Ranges and a source that fails half way, through http.ServeContent.
func TestLoopbackServeContent(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 100<<10)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var src io.ReadSeeker = bytes.NewReader(data)
		if r.URL.Path == "/fail" {
			src = &failAfter{bytes.NewReader(data), 500 << 10}
		}
		http.ServeContent(w, r, "", time.Time{}, src)
	})
	c := &http.Client{Transport: &client.Loopback{Handlers: map[string]http.Handler{"vol:1": h}}}
	req, _ := http.NewRequest(http.MethodGet, "http://vol:1/x", nil)
	req.Header.Set("Range", "bytes=1000-1009")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusPartialContent || string(b) != "0123456789" {
		t.Fatalf("range: %d, %d bytes %.20q, %v", resp.StatusCode, len(b), b, err)
	}
	resp, err = c.Get("http://vol:1/fail")
	if err != nil {
		t.Fatal(err)
	}
	b, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || len(b) >= len(data) {
		t.Fatalf("a source failing half way: %d bytes, err %v; want an error", len(b), err)
	}
}

type failAfter struct {
	*bytes.Reader
	at int64
}

func (f *failAfter) Read(p []byte) (int, error) {
	pos := f.Size() - int64(f.Len())
	if pos >= f.at {
		return 0, errors.New("disk error")
	}
	return f.Reader.Read(p[:min(int64(len(p)), f.at-pos)])
}

// goid is the calling goroutine's id, from its stack header.
func goid() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	return strings.Fields(string(b))[1]
}

type goidSource struct {
	left int
	ids  map[string]int
	fail any // panics with this at the end, if not nil
}

func (s *goidSource) Read(p []byte) (int, error) {
	s.ids[goid()]++
	if s.left == 0 {
		if s.fail != nil {
			panic(s.fail)
		}
		return 0, io.EOF
	}
	n := min(len(p), s.left)
	s.left -= n
	return n, nil
}

// A handler's ReadFrom source (a file, through http.ServeContent) is read
// in the caller's Reads, in the caller's goroutine: no goroutine switch
// per piece. One that panics fails the body with ErrHandlerPanic.
func TestLoopbackReadsSourceInCaller(t *testing.T) {
	const size = 3<<20 + 5
	var src *goidSource
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		n, err := w.(io.ReaderFrom).ReadFrom(src)
		if r.URL.Path == "/ok" && (n != size || err != nil) {
			t.Errorf("ReadFrom: %d, %v", n, err)
		}
	})
	c := &http.Client{Transport: &client.Loopback{Handlers: map[string]http.Handler{"vol:1": h}}}
	src = &goidSource{left: size, ids: map[string]int{}}
	resp, err := c.Get("http://vol:1/ok")
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.CopyBuffer(io.Discard, resp.Body, make([]byte, 1<<20))
	resp.Body.Close()
	if n != size || err != nil {
		t.Fatalf("read %d of %d bytes, err %v", n, size, err)
	}
	if me := goid(); len(src.ids) != 1 || src.ids[me] == 0 {
		t.Fatalf("source read in goroutines %v, want only the caller's (%s)", src.ids, me)
	}

	src = &goidSource{left: 2 << 20, ids: map[string]int{}, fail: "disk on fire"}
	resp, err = c.Get("http://vol:1/panic")
	if err != nil {
		t.Fatal(err)
	}
	n, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if !errors.Is(err, client.ErrHandlerPanic) || n != 2<<20 {
		t.Fatalf("a panicking source: read %d bytes, err %v; want ErrHandlerPanic after 2 MiB", n, err)
	}
}

// A caller that closes the body half way ends the handler's ReadFrom, and
// the source is not read after it returned.
func TestLoopbackCloseDuringSource(t *testing.T) {
	returned := make(chan struct{})
	var after atomic.Bool
	src := readerFunc(func(p []byte) (int, error) {
		select {
		case <-returned:
			after.Store(true)
		default:
		}
		return len(p), nil // endless
	})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := w.(io.ReaderFrom).ReadFrom(src)
		if !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("ReadFrom after the caller closed: %v", err)
		}
		close(returned)
	})
	c := &http.Client{Transport: &client.Loopback{Handlers: map[string]http.Handler{"vol:1": h}}}
	resp, err := c.Get("http://vol:1/x")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // waits for the handler
	<-returned
	if _, err := resp.Body.Read(buf); err == nil {
		t.Fatal("a Read after Close succeeded")
	}
	if after.Load() {
		t.Fatal("the source was read after ReadFrom returned")
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
