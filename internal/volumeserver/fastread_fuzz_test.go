package volumeserver

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"golang.org/x/net/http/httpguts"
)

// fastHeaders are the only headers a request the fast path answers may have.
var fastHeaders = map[string]bool{"Host": true, "User-Agent": true, "Accept": true, "Accept-Encoding": true, "Connection": true}

// FuzzFastReadHead checks the fast path's request parser (peekHead,
// parseFastGet) against net/http's: whatever bytes arrive, the parser does
// not crash, finds the same head whether the bytes come at once or one by
// one, and a request it takes is one net/http's server reads the same way
// (method, target, version, no body, no Connection: close, valid Host and
// header bytes) and ends where net/http's ends, so that the two can never
// disagree on where the next request begins. A request it takes for a
// stored needle is answered as the net/http handler answers it.
func FuzzFastReadHead(f *testing.F) {
	d := startDiffServer(f)
	named, typed := d.fids["named"], d.fids["typed"]
	for _, s := range []string{
		"GET " + named + " HTTP/1.1\r\nHost: kelp.test\r\n\r\n",
		"HEAD " + typed + " HTTP/1.1\r\nHost: kelp.test\r\nUser-Agent: fuzz\r\nAccept: */*\r\nAccept-Encoding: gzip\r\nConnection: keep-alive\r\n\r\n",
		"GET " + d.fids["mid"] + " HTTP/1.1\r\nhost: [::1]:80\r\n\r\nGET " + named + " HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET " + d.fids["empty"] + " HTTP/1.1\r\nHost:\tx \r\nuser-agent: caf\xc3\xa9\r\n\r\n",
		"GET " + named + ".pdf HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET " + d.fids["unknown"] + " HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET " + named + " HTTP/1.1\r\nHost: x\r\nUser-Agent: x\n\nGET " + typed + " HTTP/1.1\r\n\r\n",
		"GET " + named + " HTTP/1.1\r\nHost: x\r\nAccept: a\nContent-Length: 5\r\n\r\nhello",
		"GET " + named + " HTTP/1.1\r\nHost: x\r\nUser-Agent: a\rb\r\n\r\n",
		"GET " + named + " HTTP/1.1\r\nHost: x\r\nUser-Agent: a\r\n b\r\n\r\n",
		"GET " + named + " HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"GET " + named + " HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
		"GET " + named + " HTTP/1.1\r\nHost : x\r\n\r\n",
		"GET " + named + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
		"GET " + named + " HTTP/1.1\r\nHost: x\r\nRange: bytes=0-3\r\n\r\n",
		"GET http://x" + named + " HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET " + named + "?dl=1 HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET " + named + " HTTP/1.0\r\n\r\n",
		"GET " + named + " HTTP/1.1\n\n",
		"GET " + named + " HTTP/1.1\r\nHost: x\r\n",
		"\r\nGET " + named + " HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"PUT " + named + " HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx",
		"GET " + strings.Repeat("a", 5000) + " HTTP/1.1\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		head, err := peekHead(bufio.NewReaderSize(bytes.NewReader(data), fastReadBuf), func() {})
		head1, err1 := peekHead(bufio.NewReaderSize(iotest.OneByteReader(bytes.NewReader(data)), fastReadBuf), func() {})
		if !bytes.Equal(head, head1) || errors.Is(err, errNotFast) != errors.Is(err1, errNotFast) || (err == nil) != (err1 == nil) {
			t.Fatalf("%q: all at once %q, %v; byte by byte %q, %v", data, head, err, head1, err1)
		}
		if err != nil {
			return
		}
		if !bytes.HasPrefix(data, head) || !bytes.HasSuffix(head, []byte("\r\n\r\n")) {
			t.Fatalf("%q: head %q", data, head)
		}
		path, isHead, ok := parseFastGet(head)
		if !ok {
			return
		}
		br := bufio.NewReader(bytes.NewReader(data))
		req, err := http.ReadRequest(br)
		if err != nil {
			t.Fatalf("%q: the fast path takes it, net/http does not: %v", data, err)
		}
		want := http.MethodGet
		if isHead {
			want = http.MethodHead
		}
		switch {
		case req.Method != want:
			t.Fatalf("%q: method %q, net/http %q", data, want, req.Method)
		case req.RequestURI != string(path) || req.URL.Path != string(path) || req.URL.RawQuery != "" || req.URL.Host != "":
			t.Fatalf("%q: path %q, net/http %q (%+v)", data, path, req.RequestURI, req.URL)
		case req.ProtoMajor != 1 || req.ProtoMinor != 1:
			t.Fatalf("%q: net/http reads HTTP/%d.%d", data, req.ProtoMajor, req.ProtoMinor)
		case req.ContentLength != 0 || len(req.TransferEncoding) != 0 || req.Body != http.NoBody:
			t.Fatalf("%q: net/http reads a body (%d, %v)", data, req.ContentLength, req.TransferEncoding)
		case req.Close:
			t.Fatalf("%q: net/http closes after it", data)
		case req.Host == "" || !httpguts.ValidHostHeader(req.Host):
			t.Fatalf("%q: net/http's server refuses its Host %q", data, req.Host)
		}
		// ReadRequest drops the Host header; the server counts them first.
		tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(head)))
		tp.ReadLine()
		if h, err := tp.ReadMIMEHeader(); err != nil || len(h["Host"]) != 1 {
			t.Fatalf("%q: Host headers %q (%v)", data, h["Host"], err)
		}
		for k, vv := range req.Header {
			if !fastHeaders[k] || !httpguts.ValidHeaderFieldName(k) {
				t.Fatalf("%q: header %q", data, k)
			}
			for _, v := range vv {
				if !httpguts.ValidHeaderFieldValue(v) {
					t.Fatalf("%q: net/http's server refuses %s: %q", data, k, v)
				}
			}
		}
		if rest, _ := io.ReadAll(br); !bytes.Equal(rest, data[len(head):]) {
			t.Fatalf("%q: the next request starts at %q for the fast path, at %q for net/http", data, data[len(head):], rest)
		}

		// The answer, when the fast path gives one, is the handler's.
		out, body, n, err := d.s.fastRead(head, nil)
		if err != nil {
			return
		}
		fast, err := http.ReadResponse(bufio.NewReader(io.MultiReader(bytes.NewReader(out), bytes.NewReader(body))), req)
		if err != nil {
			t.Fatalf("%q: the fast answer %q does not parse: %v", data, out, err)
		}
		fastBody, err := io.ReadAll(fast.Body)
		if err != nil || int64(len(fastBody)) != n {
			t.Fatalf("%q: fast body of %d bytes (%v), said %d", data, len(fastBody), err, n)
		}
		req.RemoteAddr = "127.0.0.1:1"
		w := httptest.NewRecorder()
		d.s.Handler().ServeHTTP(w, req)
		fast.Header.Del("Date")
		if fast.StatusCode != w.Code || !maps.EqualFunc(fast.Header, w.Header(), slices.Equal) || !bytes.Equal(fastBody, w.Body.Bytes()) {
			t.Fatalf("%q: fast path %d %v %q, handler %d %v %q", data, fast.StatusCode, fast.Header, fastBody, w.Code, w.Header(), w.Body)
		}
	})
}
