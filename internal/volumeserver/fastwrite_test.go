package volumeserver

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/store"
	"github.com/kelpfs/kelp/internal/ttl"
)

// TestFastWriteDifferential sends the same raw uploads (plain ones, the
// framings the fast path must leave alone, smuggling attempts, errors,
// pipelines mixing reads and writes) to the fast path and to net/http
// alone, in that order, against the same store: every byte of the answers
// must agree but the Date, and the fast path must answer the requests of
// its subset itself and no others. Writing the same file twice gives the
// same answer, so each request is sent to both.
func TestFastWriteDifferential(t *testing.T) {
	d := startDiffServer(t)
	if !d.s.fast.writes {
		t.Fatal("the fast write path is off")
	}
	if err := d.s.store.Allocate(2, "", replication.Code{}, ttl.TTL{}); err != nil {
		t.Fatal(err)
	}
	if err := d.s.store.MarkReadOnly(2, true); err != nil {
		t.Fatal(err)
	}
	rep, err := replication.Parse("001")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.s.store.Allocate(3, "", rep, ttl.TTL{}); err != nil {
		t.Fatal(err)
	}
	key := uint64(1000)
	newFid := func(vol uint32) string {
		key++
		return "/" + fid.FileID{Volume: vol, Key: key, Cookie: 0xc00c1e00 + uint32(key)}.String()
	}
	const host = "Host: kelp.test\r\n"
	put := func(method, path, body string, extra ...string) string {
		return method + " " + path + " HTTP/1.1\r\n" + host + "Content-Type: application/octet-stream\r\n" +
			strings.Join(extra, "") + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
	}
	get := func(path string) string { return "GET " + path + " HTTP/1.1\r\n" + host + "\r\n" }
	kib := strings.Repeat("k", 1024)
	big := strings.Repeat("b", 8<<10)
	a, b, c := newFid(1), newFid(1), newFid(1)
	fillFid := newFid(1)
	fillHead := len(put("PUT", fillFid, strings.Repeat("f", 1000))) - 1000
	fill := put("PUT", fillFid, strings.Repeat("f", fastReadBuf-fillHead))
	other := "/" + fid.FileID{Volume: 1, Key: key, Cookie: 0xc00c1e00 + uint32(key) + 1}.String() // c's key, another cookie

	cases := []struct {
		name string
		req  string
		fast int // requests the fast path must answer itself
	}{
		// Plain uploads: the fast path's own.
		{"PUT 1 KiB", put("PUT", a, kib), 1},
		{"POST 1 KiB", put("POST", newFid(1), kib), 1},
		{"PUT again", put("PUT", a, "again"), 1},
		{"PUT empty", put("PUT", newFid(1), ""), 1},
		{"PUT typed", "PUT " + newFid(1) + " HTTP/1.1\r\n" + host + "Content-Type: text/plain; charset=utf-8\r\nContent-Length: 5\r\n\r\nhello", 1},
		{"PUT untyped", "PUT " + newFid(1) + " HTTP/1.1\r\n" + host + "Content-Length: 5\r\n\r\nhello", 1},
		{"PUT all headers", put("PUT", newFid(1), kib, "User-Agent: Go-http-client/1.1\r\nAccept: */*\r\nAccept-Encoding: gzip\r\nConnection: keep-alive\r\nUser-Agent: twice\r\n"), 1},
		{"header case and spaces", "PUT " + newFid(1) + " HTTP/1.1\r\nhOsT:  kelp.test\t\r\ncontent-LENGTH: \t3 \r\n\r\nabc", 1},
		{"file id with extension", put("PUT", newFid(1)+".txt", "x"), 1},
		{"unhurried sync", put("PUT", newFid(1)+"?sync=unhurried", "x"), 1},
		{"body looks like a request", put("PUT", newFid(1), get(a)), 1},
		{"body with CRLFs and bare LFs", put("PUT", newFid(1), "\r\n\r\n\n\nGET / HTTP/1.1\r\n\x00\x7f\xff"), 1},
		{"body fills the buffer", fill, 1},
		{"pipelined writes", put("PUT", a, kib) + put("POST", b, "two") + put("PUT", c, kib), 3},
		{"write then read", put("PUT", b, "read me back") + get(b) + put("PUT", b, "and again") + get(b), 4},
		{"CL shorter than what follows", put("PUT", b, "hello")[:len(put("PUT", b, "hello"))-5] + "hel" + "lo" + get(b), 2},
		{"cookie mismatch", put("PUT", other, "x"), 1},
		{"read-only volume", put("PUT", newFid(2), "x"), 1},

		// Uploads the fast path leaves to net/http.
		{"body over the buffer", put("PUT", newFid(1), big), 0},
		{"replicated volume", put("PUT", newFid(3), "x"), 0},
		{"unknown volume", put("PUT", newFid(77), "x"), 0},
		{"bad file id", put("PUT", "/zz", "x"), 0},
		{"sync pull", put("POST", "/sync/pull", "x"), 0},
		{"query", put("PUT", newFid(1)+"?name=a.txt", "x"), 0},
		{"query ts", put("PUT", newFid(1)+"?ts=12", "x"), 0},
		{"replica request", put("PUT", newFid(1)+"?type=replicate", "x"), 0},
		{"escaped path", put("PUT", "/%31"+a[2:], "x"), 0},
		{"dot segment", put("PUT", "/x/.."+a, "x"), 0},
		{"DELETE", "DELETE " + newFid(1) + " HTTP/1.1\r\n" + host + "\r\n", 0},
		{"PATCH", put("PATCH", a, "x"), 0},
		{"lower-case method", put("put", a, "x"), 0},
		{"HTTP/1.0", "PUT " + a + " HTTP/1.0\r\nContent-Length: 1\r\n\r\nx", 0},
		{"no Host", "PUT " + a + " HTTP/1.1\r\nContent-Length: 1\r\n\r\nx", 0},
		{"two Hosts", "PUT " + a + " HTTP/1.1\r\n" + host + host + "Content-Length: 1\r\n\r\nx", 0},
		{"no Content-Length", "PUT " + a + " HTTP/1.1\r\n" + host + "\r\n", 0},
		{"POST without body", "POST " + a + " HTTP/1.1\r\n" + host + "\r\n" + get(a), 0},
		{"chunked", "PUT " + a + " HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n" + get(a), 0},
		{"CL and TE", put("PUT", a, "0\r\n\r\n", "Transfer-Encoding: chunked\r\n") + get(a), 0},
		{"TE and CL", "PUT " + a + " HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n" + get(a), 0},
		{"CL twice same", "PUT " + a + " HTTP/1.1\r\n" + host + "Content-Length: 1\r\nContent-Length: 1\r\n\r\nx", 0},
		{"CL twice differing", "PUT " + a + " HTTP/1.1\r\n" + host + "Content-Length: 1\r\nContent-Length: 6\r\n\r\nxhello", 0},
		{"CL list", "PUT " + a + " HTTP/1.1\r\n" + host + "Content-Length: 1, 1\r\n\r\nx", 0},
		{"CL leading zero", "PUT " + a + " HTTP/1.1\r\n" + host + "Content-Length: 01\r\n\r\nx", 0},
		{"CL plus", "PUT " + a + " HTTP/1.1\r\n" + host + "Content-Length: +1\r\n\r\nx", 0},
		{"CL negative", "PUT " + a + " HTTP/1.1\r\n" + host + "Content-Length: -1\r\n\r\nx", 0},
		{"CL hex", "PUT " + a + " HTTP/1.1\r\n" + host + "Content-Length: 0x1\r\n\r\nx", 0},
		{"CL empty", "PUT " + a + " HTTP/1.1\r\n" + host + "Content-Length:\r\n\r\nx", 0},
		{"CL huge", "PUT " + a + " HTTP/1.1\r\n" + host + "Content-Length: 99999999999999999999\r\n\r\nx", 0},
		{"CL obs-fold", "PUT " + a + " HTTP/1.1\r\n" + host + "Content-Length:\r\n 1\r\n\r\nx", 0},
		{"space before colon", "PUT " + a + " HTTP/1.1\r\n" + host + "Content-Length : 1\r\n\r\nx", 0},
		{"bare LF in head", "PUT " + a + " HTTP/1.1\n" + host[:len(host)-2] + "\nContent-Length: 1\n\nx", 0},
		{"bare LF hides CL", put("PUT", a, "xy", "User-Agent: a\nContent-Length: 1\r\n"), 0},
		{"Expect 100-continue", put("PUT", a, "x", "Expect: 100-continue\r\n"), 0},
		{"Authorization", put("PUT", a, "x", "Authorization: Bearer x\r\n"), 1},
		{"two Authorizations", put("PUT", a, "x", "Authorization: Bearer x\r\nAuthorization: Bearer y\r\n"), 0},
		{"Connection: close", put("PUT", a, "x", "Connection: close\r\n") + get(a), 0},
		{"Content-Type twice", put("PUT", a, "x", "Content-Type: text/plain\r\n"), 0},
		{"multipart", "POST " + newFid(1) + " HTTP/1.1\r\n" + host + "Content-Type: multipart/form-data; boundary=xx\r\nContent-Length: 76\r\n\r\n" +
			"--xx\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\nhi\r\n--xx--\r\n", 0},
		{"Multipart upper case", "POST " + newFid(1) + " HTTP/1.1\r\n" + host + "Content-Type: MULTIPART/form-data\r\nContent-Length: 1\r\n\r\nx", 0},
		{"short body", "PUT " + a + " HTTP/1.1\r\n" + host + "Content-Length: 100\r\n\r\nonly this", 0},
		{"head only", "PUT " + a + " HTTP/1.1\r\n" + host + "Content-Length: 100\r\n\r\n", 0},
		{"truncated head", "PUT " + a + " HTTP/1.1\r\n" + host, 0},

		// Pipelines that change hands.
		{"write, 404, write", put("PUT", a, kib) + put("PUT", newFid(77), "x") + put("PUT", b, kib), 1},
		{"read, write, read", get(a) + put("PUT", c, kib) + get(c), 3},
		{"write, smuggle attempt", put("PUT", a, kib) + put("PUT", a, "0\r\n\r\n", "Transfer-Encoding: chunked\r\n") + get(a), 1},
	}
	half := map[string]bool{"short body": true, "head only": true, "truncated head": true}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			send := raw
			// An incomplete request is sent with the sending side closed
			// after it: the server has no other way to know it ends.
			if !half[tc.name] {
				send = rawOpen
			}
			n0 := d.s.fast.served.Load()
			fast := normalizeWritten(send(t, d.addr, tc.req))
			served := d.s.fast.served.Load() - n0
			slow := normalizeWritten(send(t, d.ref, tc.req))
			if !bytes.Equal(fast, slow) {
				t.Errorf("request %q\nfast path: %q\nnet/http:  %q", clip([]byte(tc.req)), clip(fast), clip(slow))
			}
			if served != int64(tc.fast) {
				t.Errorf("request %q: the fast path answered %d requests, want %d", clip([]byte(tc.req)), served, tc.fast)
			}
			if len(fast) == 0 && tc.req != "" {
				t.Errorf("request %q: no answer", clip([]byte(tc.req)))
			}
		})
	}
	// What the fast path wrote is there.
	resp := raw(t, d.addr, get(c))
	if !bytes.HasPrefix(resp, []byte("HTTP/1.1 200 OK\r\n")) || !bytes.HasSuffix(resp, []byte(kib)) {
		t.Errorf("read back: %q", clip(resp))
	}
}

// rawOpen is raw without closing the sending side: the requests are
// followed by one with "Connection: close", after whose answer the server
// closes. (net/http cancels the context of a request whose client closed
// its sending side, so a write pipelined behind another request fails
// there with "context canceled" or not, by a race: half-closing clients
// are not comparable. The fast path lets such a write finish.)
func rawOpen(t testing.TB, addr, req string) []byte {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	go io.WriteString(c, req+"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("no end of answer: %v; got %q", err, b)
	}
	return b
}

// A body that arrives in pieces (each byte its own write) is answered by
// the fast path; one that stops for longer than the header limit goes to
// net/http, which waits for the rest as it always did and answers it; a
// client that goes mid-body leaves nothing written.
func TestFastWriteBodyInPieces(t *testing.T) {
	d := startDiffServer(t)
	d.s.fast.header.Store(int64(300 * time.Millisecond))
	path := "/" + fid.FileID{Volume: 1, Key: 5000, Cookie: 0x1234}.String()
	body := strings.Repeat("p", 1000)
	req := "PUT " + path + " HTTP/1.1\r\nHost: kelp.test\r\nContent-Length: 1000\r\n\r\n" + body

	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", d.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(20 * time.Second))
		return c, bufio.NewReader(c)
	}
	answer := func(br *bufio.Reader) {
		t.Helper()
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusCreated || !bytes.Contains(b, []byte(`"size":1000`)) {
			t.Fatalf("%d %q", resp.StatusCode, b)
		}
	}

	n0 := d.s.fast.wrote.Load()
	c, br := dial()
	for i := range len(req) {
		if _, err := c.Write([]byte{req[i]}); err != nil {
			t.Fatal(err)
		}
	}
	answer(br)
	if n := d.s.fast.wrote.Load() - n0; n != 1 {
		t.Fatalf("the fast path answered %d writes sent byte by byte, want 1", n)
	}

	// The body stops past the header limit: net/http's, which waits.
	h0 := d.s.fast.handed.Load()
	c, br = dial()
	io.WriteString(c, req[:len(req)-10])
	for deadline := time.Now().Add(10 * time.Second); d.s.fast.handed.Load() == h0; {
		if time.Now().After(deadline) {
			t.Fatal("a stalled body was not handed to net/http")
		}
		time.Sleep(10 * time.Millisecond)
	}
	io.WriteString(c, req[len(req)-10:])
	answer(br)
	if n := d.s.fast.wrote.Load() - n0; n != 1 {
		t.Fatalf("the fast path answered a body that stalled")
	}

	// The client goes mid-body (raw returns once the server has closed
	// the connection, after its answer): nothing is written.
	gone := "/" + fid.FileID{Volume: 1, Key: 5001, Cookie: 0x1234}.String()
	got := raw(t, d.addr, "PUT "+gone+" HTTP/1.1\r\nHost: kelp.test\r\nContent-Length: 1000\r\n\r\n"+body[:500])
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 400 ")) {
		t.Errorf("half a body: %q", got)
	}
	v, _ := d.s.store.Volume(1)
	if obj, err := v.Read(5001, 0x1234); err == nil {
		obj.Close()
		t.Fatal("a needle written from half a body")
	}

	// The same behind a whole upload on the connection: the fast path
	// answers the first and hands the second over. (Not in the
	// differential test: net/http there answers the second 400 or, when
	// it has seen the client's end first, 500 "context canceled".)
	n0 = d.s.fast.wrote.Load()
	gone = "/" + fid.FileID{Volume: 1, Key: 5002, Cookie: 0x1234}.String()
	got = raw(t, d.addr, req+"PUT "+gone+" HTTP/1.1\r\nHost: kelp.test\r\nContent-Length: 1000\r\n\r\n"+body[:500])
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 201 ")) || bytes.Count(got, []byte("HTTP/1.1 ")) != 2 {
		t.Errorf("a write, then half a body: %q", got)
	}
	if n := d.s.fast.wrote.Load() - n0; n != 1 {
		t.Errorf("the fast path answered %d writes, want 1", n)
	}
	if obj, err := v.Read(5002, 0x1234); err == nil {
		obj.Close()
		t.Fatal("a needle written from half a body")
	}
}

// TestFastWriteWhenSigned: when writes need a token the fast write path
// serves them through authorize: an upload without a token, or with one
// for another file id, is refused; one with its own token is written.
func TestFastWriteWhenSigned(t *testing.T) {
	signer := auth.NewSigner("write-key", time.Minute)
	s, err := New(Config{IP: "127.0.0.1", Disks: []store.DiskConfig{{Dir: t.TempDir(), MaxVolumes: 1}},
		Logger: slog.New(slog.DiscardHandler), Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.store.Allocate(1, "", replication.Code{}, ttl.TTL{}); err != nil {
		t.Fatal(err)
	}
	go s.httpSrv.Serve(s.httpLn)
	t.Cleanup(func() { s.Close() })
	if s.fast == nil || !s.fast.writes {
		t.Fatal("want the fast read and write paths on")
	}
	id := fid.FileID{Volume: 1, Key: 1, Cookie: 7}
	put := func(token string) []byte {
		t.Helper()
		h := ""
		if token != "" {
			h = "Authorization: Bearer " + token + "\r\n"
		}
		return raw(t, s.URL(), "PUT /"+id.String()+" HTTP/1.1\r\nHost: x\r\n"+h+"Content-Length: 1\r\n\r\nx")
	}
	if got := put(""); !bytes.HasPrefix(got, []byte("HTTP/1.1 401 ")) {
		t.Errorf("write without a token: %q", got)
	}
	if got := put(signer.Sign(fid.FileID{Volume: 1, Key: 2, Cookie: 7}, 1)); !bytes.HasPrefix(got, []byte("HTTP/1.1 401 ")) {
		t.Errorf("write with another file's token: %q", got)
	}
	v, _ := s.store.Volume(1)
	if obj, err := v.Read(id.Key, id.Cookie); err == nil {
		obj.Close()
		t.Fatal("a refused write was stored")
	}
	if got := put(signer.Sign(id, 1)); !bytes.HasPrefix(got, []byte("HTTP/1.1 201 ")) {
		t.Errorf("write with its token: %q", got)
	}
	if n := s.fast.wrote.Load(); n != 3 {
		t.Errorf("the fast path answered %d writes, want 3", n)
	}
	s2, err := New(Config{IP: "127.0.0.1", Disks: []store.DiskConfig{{Dir: t.TempDir(), MaxVolumes: 1}},
		Logger: slog.New(slog.DiscardHandler), NoFastWrite: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.fast == nil || s2.fast.writes {
		t.Error("NoFastWrite: want the fast read path on and the fast write path off")
	}
}
