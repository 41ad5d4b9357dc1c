package volumeserver

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/httpserve"
	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/security/tlstest"
	"github.com/kelpfs/kelp/internal/store"
	"github.com/kelpfs/kelp/internal/testutil"
	"github.com/kelpfs/kelp/internal/ttl"
)

// diffServer is one volume server reachable two ways: addr through its own
// listener (the fast read path in front of net/http) and ref through a
// plain net/http server of the same handler and timeouts, the path every
// request took before fastread.go.
type diffServer struct {
	s         *Server
	addr, ref string
	fids      map[string]string // name -> "/<fid>"
	etag      string            // of "named"
	mod       time.Time         // of "named"
}

func startDiffServer(t testing.TB) *diffServer {
	t.Helper()
	s, err := New(Config{IP: "127.0.0.1", Disks: []store.DiskConfig{{Dir: t.TempDir(), MaxVolumes: 4}},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if s.fast == nil {
		t.Fatal("the fast read path is off")
	}
	if err := s.store.Allocate(1, "", replication.Code{}, ttl.TTL{}); err != nil {
		t.Fatal(err)
	}
	go s.httpSrv.Serve(s.httpLn)
	refLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ref := httpserve.New(s.Handler(), s.log)
	go ref.Serve(refLn)
	t.Cleanup(func() {
		ref.Stop(time.Second)
		s.Close()
	})
	d := &diffServer{s: s, addr: s.URL(), ref: refLn.Addr().String(), fids: map[string]string{}}
	key := uint64(0)
	put := func(name, query, ctype string, body []byte) {
		key++
		path := "/" + fid.FileID{Volume: 1, Key: key, Cookie: 0x5eed0000 + uint32(key)}.String()
		req := httptest.NewRequest(http.MethodPut, path+query, bytes.NewReader(body))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req)
		if w.Code != http.StatusCreated {
			t.Fatalf("PUT %s: %d %s", name, w.Code, w.Body)
		}
		d.fids[name] = path
	}
	small := []byte("0123456789abcdefghijklmnopqrstuvwxyz")
	put("named", "?name=report%20one.pdf", "", small)
	put("typed", "", "text/plain; charset=utf-8", small)
	put("utf8name", "?name=%C3%A9t%C3%A9.txt", "", small)
	put("empty", "", "", nil)
	put("mid", "", "", bytes.Repeat([]byte("m"), 100<<10)) // sent uncopied (writev)
	put("large", "", "", bytes.Repeat([]byte("L"), 2<<20)) // read on demand: net/http's
	put("deleted", "", "", small)
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodDelete, d.fids["deleted"], nil))
	if w.Code >= 300 {
		t.Fatalf("DELETE: %d %s", w.Code, w.Body)
	}
	id, _ := fid.Parse(strings.TrimPrefix(d.fids["named"], "/"))
	d.fids["badcookie"] = "/" + fid.FileID{Volume: id.Volume, Key: id.Key, Cookie: id.Cookie + 1}.String()
	d.fids["unknown"] = "/" + fid.FileID{Volume: 1, Key: 999, Cookie: 1}.String()
	d.fids["novolume"] = "/" + fid.FileID{Volume: 77, Key: 1, Cookie: 1}.String()
	v, _ := s.store.Volume(1)
	obj, err := v.Read(id.Key, id.Cookie)
	if err != nil {
		t.Fatal(err)
	}
	d.etag, d.mod = `"`+obj.ETag+`"`, obj.ModTime
	obj.Close()
	return d
}

// raw sends req on a new connection to addr, closes its sending side and
// returns every byte the server sent until it closed the connection.
func raw(t testing.TB, addr, req string) []byte {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	go func() {
		io.WriteString(c, req) // a server that answered early may not read it all
		c.(*net.TCPConn).CloseWrite()
	}()
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("no end of answer after 20s; got %q", b)
	}
	return b
}

var (
	dateLine = regexp.MustCompile(`(?m)^Date: [^\r\n]*\r$`)
	modLine  = regexp.MustCompile(`(?m)^Last-Modified: [^\r\n]*\r$`)
	boundary = regexp.MustCompile(`boundary=([0-9a-f]+)`)
)

// normalize blanks what differs between two answers to the same request:
// the Date and the random boundary of a multipart/byteranges body.
func normalize(b []byte) []byte {
	b = dateLine.ReplaceAll(b, []byte("Date: -\r"))
	for _, m := range boundary.FindAllSubmatch(b, -1) {
		b = bytes.ReplaceAll(b, m[1], []byte("BOUNDARY"))
	}
	return b
}

// normalizeWritten is normalize for answers to requests that write: the
// needle a pipeline writes and then reads back gets each server's clock
// at its write, which may fall on either side of a second's turn.
func normalizeWritten(b []byte) []byte {
	return modLine.ReplaceAll(normalize(b), []byte("Last-Modified: -\r"))
}

// TestFastReadDifferential sends the same raw requests (plain reads,
// ranges, conditional and pipelined requests, smuggling attempts and
// malformed input) to the fast read path and to net/http alone: every byte
// of the answers must agree but the Date, and the fast path must answer
// the plain reads itself and no others.
func TestFastReadDifferential(t *testing.T) {
	d := startDiffServer(t)
	f := d.fids
	const host = "Host: kelp.test\r\n"
	get := func(method, path string, extra ...string) string {
		return method + " " + path + " HTTP/1.1\r\n" + host + "User-Agent: diff\r\nAccept: */*\r\n" + strings.Join(extra, "") + "\r\n"
	}
	mod := d.mod.UTC().Format(http.TimeFormat)
	before := d.mod.Add(-time.Hour).UTC().Format(http.TimeFormat)
	after := d.mod.Add(time.Hour).UTC().Format(http.TimeFormat)
	long := strings.Repeat("a", 8<<10)

	cases := []struct {
		name string
		req  string
		fast int // requests the fast path must answer itself
	}{
		// Plain reads: the fast path's own.
		{"GET named", get("GET", f["named"]), 1},
		{"HEAD named", get("HEAD", f["named"]), 1},
		{"GET typed", get("GET", f["typed"]), 1},
		{"GET utf-8 name", get("GET", f["utf8name"]), 1},
		{"GET empty", get("GET", f["empty"]), 1},
		{"HEAD empty", get("HEAD", f["empty"]), 1},
		{"GET 100 KiB", get("GET", f["mid"]), 1},
		{"HEAD 100 KiB", get("HEAD", f["mid"]), 1},
		{"minimal", "GET " + f["named"] + " HTTP/1.1\r\nHost: x\r\n\r\n", 1},
		{"header case and spaces", "GET " + f["named"] + " HTTP/1.1\r\nhOsT:   kelp.test \t\r\nACCEPT-ENCODING: gzip\r\nuser-agent:\r\n\r\n", 1},
		{"keep-alive", get("GET", f["named"], "Connection: Keep-Alive\r\n"), 1},
		{"obs-text in User-Agent", get("GET", f["named"], "User-Agent: caf\xc3\xa9\r\n"), 1},
		{"host with port", "GET " + f["named"] + " HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", 1},
		{"pipelined", get("GET", f["named"]) + get("HEAD", f["typed"]) + get("GET", f["mid"]) + get("GET", f["typed"]), 4},

		// Reads the fast path leaves to net/http.
		{"large needle", get("GET", f["large"]), 0},
		{"HEAD large needle", get("HEAD", f["large"]), 0},
		{"deleted", get("GET", f["deleted"]), 0},
		{"bad cookie", get("GET", f["badcookie"]), 0},
		{"unknown needle", get("GET", f["unknown"]), 0},
		{"unknown volume", get("GET", f["novolume"]), 0},
		{"bad file id", get("GET", "/zz"), 0},
		{"file id with extension", get("GET", f["named"]+".pdf"), 1},
		{"status", get("GET", "/status"), 0},
		{"healthz", get("GET", "/healthz"), 0},
		{"query dl", get("GET", f["named"]+"?dl=true"), 0},
		{"query empty", get("GET", f["named"]+"?"), 0},
		{"fragment", get("GET", f["named"]+"#x"), 0},
		{"escaped path", get("GET", "/%31"+f["named"][2:]), 0},
		{"double slash", get("GET", "/"+f["named"]), 0},
		{"dot segment", get("GET", "/x/.."+f["named"]), 0},
		{"absolute form", "GET http://kelp.test" + f["named"] + " HTTP/1.1\r\n" + host + "\r\n", 0},
		{"absolute form other host", "GET http://other" + f["named"] + " HTTP/1.1\r\n" + host + "\r\n", 0},
		{"asterisk", "OPTIONS * HTTP/1.1\r\n" + host + "\r\n", 0},
		{"OPTIONS", get("OPTIONS", f["named"]), 0},
		{"lower-case method", get("get", f["named"]), 0},
		{"HTTP/1.0", "GET " + f["named"] + " HTTP/1.0\r\n\r\n", 0},
		{"HTTP/1.0 keep-alive", "GET " + f["named"] + " HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" + get("GET", f["typed"]), 0},
		{"HTTP/1.2", "GET " + f["named"] + " HTTP/1.2\r\n" + host + "\r\n", 0},
		{"HTTP/2.0", "GET " + f["named"] + " HTTP/2.0\r\n" + host + "\r\n", 0},
		{"HTTP/0.9", "GET " + f["named"] + "\r\n\r\n", 0},
		{"h2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 0},
		{"Connection: close", get("GET", f["named"], "Connection: close\r\n") + get("GET", f["typed"]), 0},
		{"Connection twice", get("GET", f["named"], "Connection: keep-alive\r\nConnection: close\r\n") + get("GET", f["typed"]), 0},
		{"Connection list", get("GET", f["named"], "Connection: keep-alive, close\r\n") + get("GET", f["typed"]), 0},
		{"Upgrade", get("GET", f["named"], "Connection: Upgrade\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"), 0},
		{"Expect 100-continue", get("GET", f["named"], "Expect: 100-continue\r\n"), 0},
		{"Expect other", get("GET", f["named"], "Expect: magic\r\n"), 0},
		{"Authorization", get("GET", f["named"], "Authorization: Bearer x\r\n"), 0},
		{"Origin (CORS)", get("GET", f["named"], "Origin: http://evil.example\r\n"), 0},

		// Range, as ServeContent answers it.
		{"range", get("GET", f["named"], "Range: bytes=0-3\r\n"), 0},
		{"range suffix", get("GET", f["named"], "Range: bytes=-5\r\n"), 0},
		{"range open", get("GET", f["named"], "Range: bytes=30-\r\n"), 0},
		{"range multi", get("GET", f["named"], "Range: bytes=0-1,4-5\r\n"), 0},
		{"range unsatisfiable", get("GET", f["named"], "Range: bytes=100-200\r\n"), 0},
		{"range malformed", get("GET", f["named"], "Range: bytes=x-y\r\n"), 0},
		{"range other unit", get("GET", f["named"], "Range: items=0-1\r\n"), 0},
		{"range on HEAD", get("HEAD", f["named"], "Range: bytes=0-3\r\n"), 0},
		{"range on empty", get("GET", f["empty"], "Range: bytes=0-3\r\n"), 0},
		{"range twice", get("GET", f["named"], "Range: bytes=0-3\r\nRange: bytes=4-5\r\n"), 0},
		{"If-Range match", get("GET", f["named"], "Range: bytes=0-3\r\nIf-Range: "+d.etag+"\r\n"), 0},
		{"If-Range mismatch", get("GET", f["named"], "Range: bytes=0-3\r\nIf-Range: \"x\"\r\n"), 0},

		// Conditional requests.
		{"If-None-Match match", get("GET", f["named"], "If-None-Match: "+d.etag+"\r\n"), 0},
		{"If-None-Match star", get("GET", f["named"], "If-None-Match: *\r\n"), 0},
		{"If-None-Match other", get("GET", f["named"], "If-None-Match: \"x\"\r\n"), 0},
		{"If-None-Match on HEAD", get("HEAD", f["named"], "If-None-Match: "+d.etag+"\r\n"), 0},
		{"If-Modified-Since same", get("GET", f["named"], "If-Modified-Since: "+mod+"\r\n"), 0},
		{"If-Modified-Since later", get("GET", f["named"], "If-Modified-Since: "+after+"\r\n"), 0},
		{"If-Modified-Since earlier", get("GET", f["named"], "If-Modified-Since: "+before+"\r\n"), 0},
		{"If-Modified-Since junk", get("GET", f["named"], "If-Modified-Since: yesterday\r\n"), 0},
		{"If-Match mismatch", get("GET", f["named"], "If-Match: \"x\"\r\n"), 0},
		{"If-Match match", get("GET", f["named"], "If-Match: "+d.etag+"\r\n"), 0},
		{"If-Unmodified-Since earlier", get("GET", f["named"], "If-Unmodified-Since: "+before+"\r\n"), 0},

		// Request smuggling and framing.
		{"GET with Content-Length body", get("GET", f["named"], "Content-Length: 5\r\n") + "hello" + get("GET", f["typed"]), 0},
		{"GET with hidden request as body", get("GET", f["named"], fmt.Sprintf("Content-Length: %d\r\n", len(get("GET", f["typed"])))) + get("GET", f["typed"]), 0},
		{"GET chunked", get("GET", f["named"], "Transfer-Encoding: chunked\r\n") + "5\r\nhello\r\n0\r\n\r\n" + get("GET", f["typed"]), 0},
		{"CL and TE", get("GET", f["named"], "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n") + "0\r\n\r\n" + get("GET", f["typed"]), 0},
		{"CL twice differing", get("GET", f["named"], "Content-Length: 0\r\nContent-Length: 5\r\n") + "hello", 0},
		{"CL twice same", get("GET", f["named"], "Content-Length: 0\r\nContent-Length: 0\r\n"), 0},
		{"CL negative", get("GET", f["named"], "Content-Length: -1\r\n"), 0},
		{"TE identity", get("GET", f["named"], "Transfer-Encoding: identity\r\n"), 0},
		{"TE gzip", get("GET", f["named"], "Transfer-Encoding: gzip, chunked\r\n") + "0\r\n\r\n", 0},
		{"bare LF request", "GET " + f["named"] + " HTTP/1.1\n" + host[:len(host)-2] + "\n\n", 0},
		{"bare LF ends head in value", "GET " + f["named"] + " HTTP/1.1\r\n" + host + "User-Agent: x\n\nGET " + f["typed"] + " HTTP/1.1\r\n" + host + "\r\n", 1}, // two requests for net/http: the second is reclaimed
		{"bare LF hides a request", "GET " + f["named"] + " HTTP/1.1\r\n" + host + "User-Agent: x\n\nGET " + f["typed"] + " HTTP/1.1\r\nAccept: y\r\n\r\n", 0},
		{"bare LF line in Accept", "GET " + f["named"] + " HTTP/1.1\r\n" + host + "Accept: a\nContent-Length: 5\r\n\r\nhello", 0},
		{"bare CR in value", get("GET", f["named"], "User-Agent: a\rb\r\n"), 0},
		{"bare CR ends line", "GET " + f["named"] + " HTTP/1.1\r" + host + "\r\n", 0},
		{"NUL in value", get("GET", f["named"], "User-Agent: a\x00b\r\n"), 0},
		{"DEL in value", get("GET", f["named"], "Accept: a\x7fb\r\n"), 0},
		{"ESC in value", get("GET", f["named"], "Accept: a\x1bb\r\n"), 0},
		{"obs-fold", get("GET", f["named"], "User-Agent: a\r\n b\r\n"), 0},
		{"obs-fold tab", get("GET", f["named"], "User-Agent: a\r\n\tContent-Length: 5\r\n") + "hello", 0},
		{"obs-fold of Host", "GET " + f["named"] + " HTTP/1.1\r\nHost: kelp\r\n .test\r\n\r\n", 0},
		{"space before colon", get("GET", f["named"], "Content-Length : 5\r\n") + "hello", 0},
		{"space before colon Host", "GET " + f["named"] + " HTTP/1.1\r\nHost : kelp.test\r\n\r\n", 0},
		{"leading space header", "GET " + f["named"] + " HTTP/1.1\r\n " + host + "\r\n", 0},
		{"header without colon", get("GET", f["named"], "User-Agent\r\n"), 0},
		{"empty header name", get("GET", f["named"], ": x\r\n"), 0},
		{"header name with bad byte", get("GET", f["named"], "Us(er: x\r\n"), 0},
		{"no Host", "GET " + f["named"] + " HTTP/1.1\r\nUser-Agent: x\r\n\r\n", 0},
		{"empty Host", "GET " + f["named"] + " HTTP/1.1\r\nHost:\r\n\r\n", 0},
		{"two Hosts", "GET " + f["named"] + " HTTP/1.1\r\n" + host + host + "\r\n", 0},
		{"Host with space", "GET " + f["named"] + " HTTP/1.1\r\nHost: a b\r\n\r\n", 0},
		{"Host with slash", "GET " + f["named"] + " HTTP/1.1\r\nHost: a/b\r\n\r\n", 0},
		{"Host with @", "GET " + f["named"] + " HTTP/1.1\r\nHost: u@a\r\n\r\n", 0},
		{"Host with comma", "GET " + f["named"] + " HTTP/1.1\r\nHost: a,b\r\n\r\n", 0},
		{"Host with percent", "GET " + f["named"] + " HTTP/1.1\r\nHost: a%20\r\n\r\n", 0},
		{"double space", "GET  " + f["named"] + " HTTP/1.1\r\n" + host + "\r\n", 0},
		{"tab separator", "GET\t" + f["named"] + "\tHTTP/1.1\r\n" + host + "\r\n", 0},
		{"trailing space", "GET " + f["named"] + " HTTP/1.1 \r\n" + host + "\r\n", 0},
		{"no version", "GET " + f["named"] + "\r\n" + host + "\r\n", 0},
		{"leading CRLF", "\r\n" + get("GET", f["named"]), 0},
		{"leading LF", "\n" + get("GET", f["named"]), 0},
		{"binary garbage", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 0},
		{"long header", get("GET", f["named"], "User-Agent: "+long+"\r\n"), 0},
		{"long request line", get("GET", f["named"]+"?"+long), 0},
		{"many headers", get("GET", f["named"], strings.Repeat("Accept: x\r\n", 400)), 0},
		{"truncated head", "GET " + f["named"] + " HTTP/1.1\r\n" + host, 0},
		{"truncated request line", "GET " + f["named"], 0},
		{"truncated CR", "GET " + f["named"] + " HTTP/1.1\r\n" + host + "\r", 0},
		{"only CRLFs", "\r\n\r\n\r\n", 0},
		{"nothing", "", 0},

		// Pipelines that change hands.
		// net/http answers the middle one and gives the connection back.
		{"fast, range, fast", get("GET", f["named"]) + get("GET", f["named"], "Range: bytes=0-3\r\n") + get("GET", f["typed"]), 2},
		{"fast, 404, fast", get("GET", f["named"]) + get("GET", f["unknown"]) + get("GET", f["typed"]), 2},
		{"fast, bad request", get("GET", f["named"]) + "GET / HTTP/1.1\r\nHost: a b\r\n\r\n" + get("GET", f["typed"]), 1},
		{"fast, smuggle attempt", get("GET", f["named"]) + get("GET", f["named"], "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n") + "0\r\n\r\n" + get("GET", f["typed"]), 1},
		{"fast, truncated", get("GET", f["named"]) + "GET " + f["typed"] + " HTTP/1.1\r\n", 1},
		{"fast, bare LF", get("GET", f["named"]) + "GET " + f["typed"] + " HTTP/1.1\nHost: x\n\n", 1},
		{"fast, HTTP/1.0", get("GET", f["named"]) + "GET " + f["typed"] + " HTTP/1.0\r\n\r\n" + get("GET", f["typed"]), 1},
		{"fast, close", get("GET", f["named"]) + get("GET", f["typed"], "Connection: close\r\n") + get("GET", f["typed"]), 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n0 := d.s.fast.served.Load()
			fast := normalize(raw(t, d.addr, tc.req))
			served := d.s.fast.served.Load() - n0
			slow := normalize(raw(t, d.ref, tc.req))
			if tc.name == "status" { // its figures (free bytes, ...) change between two requests
				fast, _, _ = bytes.Cut(fast, []byte("\r\n"))
				slow, _, _ = bytes.Cut(slow, []byte("\r\n"))
			}
			if !bytes.Equal(fast, slow) {
				t.Errorf("request %q\nfast path: %q\nnet/http:  %q", tc.req, clip(fast), clip(slow))
			}
			if served != int64(tc.fast) {
				t.Errorf("request %q: the fast path answered %d requests, want %d", tc.req, served, tc.fast)
			}
		})
	}
}

// clip shortens an answer for an error message.
func clip(b []byte) []byte {
	if len(b) > 600 {
		return append(b[:600:600], "..."...)
	}
	return b
}

// TestFastPathGuardedAndOverTLS: with read tokens the fast path is off (the
// token check is authorize's) and a read without a token is refused; under
// TLS it is on and serves reads over the TLS connection.
func TestFastPathGuardedAndOverTLS(t *testing.T) {
	newServer := func(cfg Config) *Server {
		t.Helper()
		cfg.IP, cfg.Logger = "127.0.0.1", slog.New(slog.DiscardHandler)
		cfg.Disks = []store.DiskConfig{{Dir: t.TempDir(), MaxVolumes: 1}}
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.store.Allocate(1, "", replication.Code{}, ttl.TTL{}); err != nil {
			t.Fatal(err)
		}
		go s.httpSrv.Serve(s.httpLn)
		t.Cleanup(func() { s.Close() })
		return s
	}
	path := "/" + fid.FileID{Volume: 1, Key: 1, Cookie: 7}.String()
	put := func(s *Server) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPut, path, strings.NewReader("guarded"))
		w := httptest.NewRecorder()
		httpserve.Recover(s.routes(), s.log).ServeHTTP(w, req) // past authorize
		if w.Code != http.StatusCreated {
			t.Fatalf("PUT: %d %s", w.Code, w.Body)
		}
	}

	reader := auth.NewSigner("read-key", time.Minute)
	s := newServer(Config{ReadSigner: reader})
	put(s)
	if s.fast != nil {
		t.Error("fast read path on with read tokens")
	}
	req := "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n"
	if got := raw(t, s.URL(), req); !bytes.HasPrefix(got, []byte("HTTP/1.1 401 ")) {
		t.Errorf("read without a token: %q", got)
	}
	id, _ := fid.Parse(path[1:])
	signed := "GET " + path + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + reader.Sign(id, 1) + "\r\n\r\n"
	if got := raw(t, s.URL(), signed); !bytes.HasPrefix(got, []byte("HTTP/1.1 200 ")) || !bytes.HasSuffix(got, []byte("guarded")) {
		t.Errorf("read with a token: %q", got)
	}

	if s := newServer(Config{NoFastRead: true}); s.fast != nil {
		t.Error("fast read path on with NoFastRead")
	}

	_, tl := tlstest.Use(t)
	s = newServer(Config{})
	put(s)
	if s.fast == nil {
		t.Fatal("fast read path off with TLS")
	}
	c, err := tls.Dial("tcp", s.URL(), tl.ClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(c, req+req)
	br := bufio.NewReader(c)
	for i := range 2 {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("TLS answer %d: %v", i+1, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || string(b) != "guarded" {
			t.Errorf("TLS answer %d: %d %q", i+1, resp.StatusCode, b)
		}
	}
	if n := s.fast.served.Load(); n != 2 {
		t.Errorf("the fast path answered %d reads over TLS, want 2", n)
	}
	// A write, then a ranged read (net/http's: the connection is handed
	// over), then a plain read (taken back) on the same TLS connection.
	other := "/" + fid.FileID{Volume: 1, Key: 2, Cookie: 7}.String()
	io.WriteString(c, "PUT "+other+" HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"+
		"GET "+other+" HTTP/1.1\r\nHost: x\r\nRange: bytes=1-2\r\n\r\n"+"GET "+other+" HTTP/1.1\r\nHost: x\r\n\r\n")
	for i, want := range []struct {
		code int
		body string
	}{{http.StatusCreated, ""}, {http.StatusPartialContent, "el"}, {http.StatusOK, "hello"}} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("TLS answer %d: %v", i+3, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want.code || want.body != "" && string(b) != want.body {
			t.Errorf("TLS answer %d: %d %q, want %d %q", i+3, resp.StatusCode, b, want.code, want.body)
		}
	}
	// A hand-over is counted once net/http took the connection, which may
	// be after its answer.
	testutil.Eventually(5*time.Second, func() bool { return s.fast.handed.Load() >= 1 })
	if w, h := s.fast.wrote.Load(), s.fast.handed.Load(); w != 1 || h != 1 {
		t.Errorf("over TLS the fast path wrote %d and handed over %d connections, want 1 and 1", w, h)
	}
}
