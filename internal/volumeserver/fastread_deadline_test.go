package volumeserver

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// A head that stops short is closed after the header limit; a kept-alive
// connection waiting for its next request is not held to that limit, only
// to the idle one; a request whose head arrives in two parts is answered.
func TestFastReadDeadlines(t *testing.T) {
	d := startDiffServer(t)
	d.s.fast.header.Store(int64(300 * time.Millisecond))
	d.s.fast.idle.Store(int64(2 * time.Second))
	req := "GET " + d.fids["typed"] + " HTTP/1.1\r\nHost: kelp.test\r\n\r\n"
	answer := raw(t, d.ref, req[:len(req)-2]+"Connection: close\r\n\r\n")
	_, body, _ := bytes.Cut(answer, []byte("\r\n\r\n"))

	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", d.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(20 * time.Second))
		return c, bufio.NewReader(c)
	}
	get := func(c net.Conn, br *bufio.Reader, parts ...string) {
		t.Helper()
		for _, p := range parts {
			if _, err := io.WriteString(c, p); err != nil {
				t.Fatal(err)
			}
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 || !bytes.Equal(b, body) {
			t.Fatalf("%d %q %v, want %q", resp.StatusCode, b, err, body)
		}
	}
	served := d.s.fast.served.Load()

	// The head stops short: closed once the header limit has passed.
	c, br := dial()
	get(c, br, req)
	start := time.Now()
	io.WriteString(c, req[:10])
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("an answer to half a head")
	}
	if waited := time.Since(start); waited < 300*time.Millisecond || waited > 1900*time.Millisecond {
		t.Fatalf("closed after %v, want the header limit (300ms), not the idle one", waited)
	}

	// Idle after an answer: closed after the idle limit, not the header one.
	c, br = dial()
	get(c, br, req)
	start = time.Now()
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("bytes on an idle connection")
	}
	if waited := time.Since(start); waited < 1900*time.Millisecond {
		t.Fatalf("an idle connection closed after %v, want the idle limit (2s)", waited)
	}

	// A head in two parts, the second after the first was read.
	c, br = dial()
	get(c, br, req[:10], req[10:])
	if n := d.s.fast.served.Load() - served; n != 3 {
		t.Fatalf("%d reads answered by the fast path, want 3", n)
	}
}
