package volumeserver

import (
	"bufio"
	"bytes"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// fastWriteHeaders are the only headers an upload the fast path takes may have.
var fastWriteHeaders = map[string]bool{"Host": true, "Content-Length": true, "Content-Type": true,
	"User-Agent": true, "Accept": true, "Accept-Encoding": true, "Connection": true}

// FuzzFastWriteHead checks the fast write path's request parser
// (peekHead, parseFastWrite) against net/http's: a request it takes is one
// net/http's server reads the same way (method, target, version, the same
// header map, a Content-Length body, no Transfer-Encoding, no Connection:
// close, a valid Host) and whose body ends where net/http's ends, so that
// the two never disagree on where the next request begins. A request it
// takes for a volume of the server is answered with the bytes of the
// handler's answer as net/http's server frames them.
func FuzzFastWriteHead(f *testing.F) {
	d := startDiffServer(f)
	named := d.fids["named"]
	for _, s := range []string{
		"PUT " + named + " HTTP/1.1\r\nHost: kelp.test\r\nContent-Length: 5\r\n\r\nhello",
		"POST " + named + " HTTP/1.1\r\nHost: kelp.test\r\nContent-Type: application/octet-stream\r\nContent-Length: 3\r\n\r\nabcGET " + named + " HTTP/1.1\r\nHost: x\r\n\r\n",
		"PUT " + named + " HTTP/1.1\r\nhost: [::1]:80\r\ncontent-length:\t0 \r\nUser-Agent: x\r\nAccept: */*\r\nAccept-Encoding: gzip\r\nConnection: keep-alive\r\n\r\n",
		"PUT " + named + " HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 2\r\n\r\nhi",
		"PUT " + named + ".txt HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx",
		"PUT " + d.fids["novolume"] + " HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx",
		"PUT " + named + " HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
		"PUT " + named + " HTTP/1.1\r\nHost: x\r\nContent-Length: 01\r\n\r\nx",
		"PUT " + named + " HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"PUT " + named + " HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nExpect: 100-continue\r\n\r\nx",
		"PUT " + named + " HTTP/1.1\r\nHost: x\r\nUser-Agent: a\nContent-Length: 1\r\n\r\nx",
		"PUT " + named + " HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n 1\r\n\r\nx",
		"PUT " + named + " HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 1\r\n\r\nx",
		"PUT " + named + "?name=a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx",
		"PUT " + named + " HTTP/1.0\r\nContent-Length: 1\r\n\r\nx",
		"PUT " + named + " HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nshort",
		"PUT " + named + " HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n" + strings.Repeat("z", 5000),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		head, err := peekHead(bufio.NewReaderSize(bytes.NewReader(data), fastReadBuf), func() {})
		if err != nil {
			return
		}
		r, ok := parseFastWrite(head, fastReadBuf-len(head))
		if !ok {
			return
		}
		if r.n < 0 || len(head)+int(r.n) > fastReadBuf {
			t.Fatalf("%q: a body of %d after a head of %d", data, r.n, len(head))
		}
		br := bufio.NewReader(bytes.NewReader(data))
		req, err := http.ReadRequest(br)
		if err != nil {
			t.Fatalf("%q: the fast path takes it, net/http does not: %v", data, err)
		}
		switch {
		case req.Method != r.method:
			t.Fatalf("%q: method %q, net/http %q", data, r.method, req.Method)
		case req.RequestURI != r.path || req.URL.Path != r.path || req.URL.RawQuery != "" || req.URL.Host != "" || req.URL.RawPath != "":
			t.Fatalf("%q: path %q, net/http %q (%+v)", data, r.path, req.RequestURI, req.URL)
		case req.ProtoMajor != 1 || req.ProtoMinor != 1:
			t.Fatalf("%q: net/http reads HTTP/%d.%d", data, req.ProtoMajor, req.ProtoMinor)
		case req.ContentLength != r.n || len(req.TransferEncoding) != 0:
			t.Fatalf("%q: net/http reads a body of %d (%v), the fast path %d", data, req.ContentLength, req.TransferEncoding, r.n)
		case req.Close:
			t.Fatalf("%q: net/http closes after it", data)
		case req.Host != r.host || !httpguts.ValidHostHeader(req.Host):
			t.Fatalf("%q: Host %q, net/http %q", data, r.host, req.Host)
		case !maps.EqualFunc(req.Header, r.header, slices.Equal):
			t.Fatalf("%q: headers %q, net/http %q", data, r.header, req.Header)
		}
		tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(head)))
		tp.ReadLine()
		if h, err := tp.ReadMIMEHeader(); err != nil || len(h["Host"]) != 1 {
			t.Fatalf("%q: Host headers %q (%v)", data, h["Host"], err)
		}
		for k, vv := range req.Header {
			if !fastWriteHeaders[k] {
				t.Fatalf("%q: header %q", data, k)
			}
			for _, v := range vv {
				if !httpguts.ValidHeaderFieldValue(v) {
					t.Fatalf("%q: net/http's server refuses %s: %q", data, k, v)
				}
			}
		}
		size := len(head) + int(r.n)
		body, err := io.ReadAll(req.Body)
		if len(data) < size {
			return // the fast path waits for the rest, then hands it over
		}
		if err != nil || !bytes.Equal(body, data[len(head):size]) {
			t.Fatalf("%q: body %q (%v), the fast path's %q", data, body, err, data[len(head):size])
		}
		if rest, _ := io.ReadAll(br); !bytes.Equal(rest, data[size:]) {
			t.Fatalf("%q: the next request starts at %q for the fast path, at %q for net/http", data, data[size:], rest)
		}

		// The answer, when the fast path gives one, is the handler's.
		if !d.s.fastWriteTakes(r.path) {
			return
		}
		out, closeAfter, err := serveFastWrite(d.s.Handler(), r, data[len(head):size], "127.0.0.1:1", nil, nil)
		if err != nil || closeAfter {
			t.Fatalf("%q: not framed (%v), close %v", data, err, closeAfter)
		}
		fast, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), req)
		if err != nil {
			t.Fatalf("%q: the fast answer %q does not parse: %v", data, out, err)
		}
		fastBody, err := io.ReadAll(fast.Body)
		if err != nil {
			t.Fatalf("%q: fast body: %v", data, err)
		}
		// The same upload again, through the handler as net/http calls it.
		req2, _ := http.ReadRequest(bufio.NewReader(bytes.NewReader(data)))
		req2.RemoteAddr = "127.0.0.1:1"
		w := httptest.NewRecorder()
		d.s.Handler().ServeHTTP(w, req2)
		fast.Header.Del("Date")
		if fast.StatusCode != w.Code || !maps.EqualFunc(fast.Header, w.Header(), slices.Equal) || !bytes.Equal(fastBody, w.Body.Bytes()) {
			t.Fatalf("%q: fast path %d %v %q, handler %d %v %q", data, fast.StatusCode, fast.Header, fastBody, w.Code, w.Header(), w.Body)
		}
	})
}
