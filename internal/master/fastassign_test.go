package master

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/kelpfs/kelp/internal/httpfast"
	"github.com/kelpfs/kelp/internal/httpserve"
	"github.com/kelpfs/kelp/internal/testutil"
)

// startFastMaster is a leading master with a volume server, reachable two
// ways: its own listener (the fast assign path in front of net/http) and a
// plain net/http server of the same handler (ref).
func startFastMaster(t testing.TB) (s *Server, ref string) {
	t.Helper()
	return startFastMasterWith(t, "")
}

// startFastMasterWith is startFastMaster with the configuration changed by
// mutate; token authenticates the assign that checks it is ready.
func startFastMasterWith(t testing.TB, token string, mutate ...func(*Config)) (s *Server, ref string) {
	t.Helper()
	s = startMaster(t, t.TempDir(), mutate...)
	if s.fast == nil {
		t.Fatal("the fast assign path is off")
	}
	if tt, ok := t.(*testing.T); ok {
		vs := newFakeVolumeServer(tt, 18094, "dc1", "rack1", 10)
		vs.connect(s.GRPCAddr())
	} else {
		t.Fatal("startFastMaster needs a *testing.T")
	}
	// Leading, with a writable volume: an assign succeeds.
	deadline := time.Now().Add(20 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, "http://"+s.HTTPAddr()+"/dir/assign", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && s.cons.IsLeader() {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no assign after 20s: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := httpserve.New(s.httpSrv.Handler, s.log)
	go r.Serve(ln)
	t.Cleanup(func() { r.Stop(time.Second) })
	return s, ln.Addr().String()
}

// rawAssign sends req on a new connection, followed by a request with
// "Connection: close" (or, with half, closes its sending side instead:
// for an incomplete request), and returns every byte the server sent until
// it closed the connection.
func rawAssign(t testing.TB, addr, req string, half bool) []byte {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	go func() {
		if half {
			io.WriteString(c, req)
			c.(*net.TCPConn).CloseWrite()
			return
		}
		io.WriteString(c, req+"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	}()
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("no end of answer after 20s; got %q", b)
	}
	return b
}

var (
	assignDate = regexp.MustCompile(`(?m)^Date: [^\r\n]*\r$`)
	assignFid  = regexp.MustCompile(`"fid":"[0-9a-f]+,[0-9a-f]+"`)
)

func normalizeAssign(b []byte) []byte {
	b = assignDate.ReplaceAll(b, []byte("Date: -\r"))
	return assignFid.ReplaceAll(b, []byte(`"fid":"-"`))
}

// TestFastAssignDifferential sends the same raw requests to the fast
// assign path and to net/http alone: every byte of the answers must agree
// but the Date and the file ids (each assign hands out new ones), and the
// fast path must answer the plain assigns itself and no others.
func TestFastAssignDifferential(t *testing.T) {
	s, ref := startFastMaster(t)
	const host = "Host: kelp.test\r\n"
	get := func(target string, extra ...string) string {
		return "GET " + target + " HTTP/1.1\r\n" + host + strings.Join(extra, "") + "\r\n"
	}
	cases := []struct {
		name string
		req  string
		fast int
	}{
		{"assign", get("/dir/assign"), 1},
		{"assign all headers", get("/dir/assign", "User-Agent: Go-http-client/1.1\r\nAccept: */*\r\nAccept-Encoding: gzip\r\nConnection: keep-alive\r\n"), 1},
		{"minimal", "GET /dir/assign HTTP/1.1\r\nHost: x\r\n\r\n", 1},
		{"header case and spaces", "GET /dir/assign HTTP/1.1\r\nhOsT: \tkelp.test \r\nconnection: Keep-Alive\r\n\r\n", 1},
		{"count", get("/dir/assign?count=3"), 1},
		{"bad count", get("/dir/assign?count=x"), 1},
		{"zero count", get("/dir/assign?count=0"), 1},
		{"collection", get("/dir/assign?collection=pics&count=2"), 1},
		{"replication short of servers", get("/dir/assign?replication=002"), 1},
		{"bad replication", get("/dir/assign?replication=9z"), 1},
		{"bad ttl", get("/dir/assign?ttl=forever"), 1},
		{"escapes in query", get("/dir/assign?collection=%70ics&x=%zz&y=a+b"), 1},
		{"empty query", get("/dir/assign?"), 1},
		{"pipelined", get("/dir/assign") + get("/dir/assign?count=2") + get("/dir/assign"), 3},

		{"POST", "POST /dir/assign HTTP/1.1\r\n" + host + "Content-Length: 0\r\n\r\n", 0},
		{"lookup", get("/dir/lookup?volumeId=1"), 0},
		{"longer path", get("/dir/assignx"), 0},
		{"trailing slash", get("/dir/assign/"), 0},
		{"escaped path", get("/dir/%61ssign"), 0},
		{"double slash", get("//dir/assign"), 0},
		{"fragment", get("/dir/assign#x"), 0},
		{"semicolon", get("/dir/assign?count=2;x=1"), 0},
		{"query with slash", get("/dir/assign?collection=a/b"), 0},
		{"absolute form", get("http://kelp.test/dir/assign"), 0},
		{"HTTP/1.0", "GET /dir/assign HTTP/1.0\r\n\r\n", 0},
		{"Connection: close", get("/dir/assign", "Connection: close\r\n") + get("/dir/assign"), 0},
		{"Authorization", get("/dir/assign", "Authorization: Bearer x\r\n"), 1},
		{"two Authorizations", get("/dir/assign", "Authorization: Bearer x\r\nAuthorization: Bearer y\r\n"), 0},
		{"forwarded", get("/dir/assign", "X-Kelp-Forwarded-By: 127.0.0.1:1\r\n"), 0},
		{"Content-Length", get("/dir/assign", "Content-Length: 5\r\n") + "hello", 0},
		{"chunked", get("/dir/assign", "Transfer-Encoding: chunked\r\n") + "0\r\n\r\n", 0},
		{"Expect", get("/dir/assign", "Expect: 100-continue\r\n"), 0},
		{"no Host", "GET /dir/assign HTTP/1.1\r\n\r\n", 0},
		{"two Hosts", get("/dir/assign", host), 0},
		{"Host with space", "GET /dir/assign HTTP/1.1\r\nHost: a b\r\n\r\n", 0},
		{"bare LF", "GET /dir/assign HTTP/1.1\nHost: x\n\n", 0},
		{"bare LF hides a request", get("/dir/assign", "User-Agent: x\n\nGET /dir/assign HTTP/1.1\r\n"), 0},
		{"obs-fold", get("/dir/assign", "User-Agent: a\r\n b\r\n"), 0},
		{"space before colon", "GET /dir/assign HTTP/1.1\r\nHost : x\r\n\r\n", 0},
		{"long header", get("/dir/assign", "User-Agent: "+strings.Repeat("u", 5000)+"\r\n"), 0},
		{"assign, lookup, assign", get("/dir/assign") + get("/dir/lookup?volumeId=1") + get("/dir/assign"), 1},
		{"assign, bad request", get("/dir/assign") + "GET /dir/assign HTTP/1.1\r\nHost: a b\r\n\r\n", 1},
	}
	half := map[string]bool{"truncated": true, "assign, truncated": true}
	cases = append(cases, []struct {
		name string
		req  string
		fast int
	}{
		{"truncated", "GET /dir/assign HTTP/1.1\r\n" + host, 0},
		{"assign, truncated", get("/dir/assign") + "GET /dir/assign HTTP/1.1\r\n", 1},
	}...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n0 := s.fast.served.Load()
			fast := normalizeAssign(rawAssign(t, s.HTTPAddr(), tc.req, half[tc.name]))
			served := s.fast.served.Load() - n0
			slow := normalizeAssign(rawAssign(t, ref, tc.req, half[tc.name]))
			if !bytes.Equal(fast, slow) {
				t.Errorf("request %q\nfast path: %q\nnet/http:  %q", tc.req, fast, slow)
			}
			if served != int64(tc.fast) {
				t.Errorf("request %q: the fast path answered %d requests, want %d", tc.req, served, tc.fast)
			}
			if len(fast) == 0 {
				t.Errorf("request %q: no answer", tc.req)
			}
		})
	}
}

// TestFastAssignTakesBackConnection: a connection handed to net/http (by
// a lookup) comes back to the fast path after net/http answered an assign
// on it, so a client that mixes lookups and assigns on its connections
// keeps the fast path.
func TestFastAssignTakesBackConnection(t *testing.T) {
	s, _ := startFastMaster(t)
	assign := "GET /dir/assign HTTP/1.1\r\nHost: kelp.test\r\n\r\n"
	lookup := "GET /dir/lookup?volumeId=1 HTTP/1.1\r\nHost: kelp.test\r\n\r\n"
	served, handed := s.fast.served.Load(), s.fast.handed.Load()
	got := rawAssign(t, s.HTTPAddr(), assign+lookup+assign+assign+assign, false)
	if n := bytes.Count(got, []byte("HTTP/1.1 200 OK")); n != 6 { // and the closing /healthz
		t.Fatalf("%d answers of 200, want 6:\n%s", n, got)
	}
	// assign: fast; lookup: handed over; assign: net/http's, then taken
	// back; two assigns: fast; /healthz: handed over.
	if n := s.fast.served.Load() - served; n != 3 {
		t.Errorf("the fast path answered %d assigns, want 3", n)
	}
	// Counted once net/http took the connection, which may be after its answer.
	testutil.Eventually(5*time.Second, func() bool { return s.fast.handed.Load()-handed >= 2 })
	if n := s.fast.handed.Load() - handed; n != 2 {
		t.Errorf("%d hand-overs to net/http, want 2", n)
	}
}

// TestFastAssignOff: NoFastAssign turns the fast assign path off.
func TestFastAssignOff(t *testing.T) {
	s := startMaster(t, t.TempDir(), func(c *Config) { c.NoFastAssign = true })
	if s.fast != nil {
		t.Error("fast assign path on with NoFastAssign")
	}
}

// FuzzFastAssignHead checks the fast assign parser (httpfast.PeekHead,
// parseAssign) against net/http's: a request it takes is one net/http's
// server reads the same way (method, target, URL, version, header map, no
// body, no Connection: close, a valid Host) and ends where net/http's
// ends, whether its bytes come at once or one by one.
func FuzzFastAssignHead(f *testing.F) {
	for _, s := range []string{
		"GET /dir/assign HTTP/1.1\r\nHost: kelp.test\r\n\r\n",
		"GET /dir/assign?count=3&collection=a%20b HTTP/1.1\r\nhost: [::1]:80\r\nUser-Agent: x\r\nAccept: */*\r\nAccept-Encoding: gzip\r\nConnection: keep-alive\r\n\r\nGET /dir/assign HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /dir/assign? HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /dir/assign?%zz HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /dir/assign HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx",
		"GET /dir/assign HTTP/1.1\r\nHost: x\r\nUser-Agent: a\nContent-Length: 1\r\n\r\nx",
		"GET /dir/assign HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
		"GET /dir/assign#x HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /dir/assign HTTP/1.0\r\n\r\n",
		"GET /dir/assign HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		head, err := httpfast.PeekHead(bufio.NewReaderSize(bytes.NewReader(data), fastAssignBuf), assignMethod, func() {})
		head1, err1 := httpfast.PeekHead(bufio.NewReaderSize(iotest.OneByteReader(bytes.NewReader(data)), fastAssignBuf), assignMethod, func() {})
		if !bytes.Equal(head, head1) || errors.Is(err, httpfast.ErrNotFast) != errors.Is(err1, httpfast.ErrNotFast) || (err == nil) != (err1 == nil) {
			t.Fatalf("%q: all at once %q, %v; byte by byte %q, %v", data, head, err, head1, err1)
		}
		if err != nil {
			return
		}
		r, err := parseAssign(head)
		if err != nil {
			return
		}
		br := bufio.NewReader(bytes.NewReader(data))
		req, err := http.ReadRequest(br)
		if err != nil {
			t.Fatalf("%q: the fast path takes it, net/http does not: %v", data, err)
		}
		switch {
		case req.Method != r.Method || req.RequestURI != r.RequestURI || !reflect.DeepEqual(req.URL, r.URL):
			t.Fatalf("%q: %s %q %+v, net/http %s %q %+v", data, r.Method, r.RequestURI, r.URL, req.Method, req.RequestURI, req.URL)
		case req.ProtoMajor != 1 || req.ProtoMinor != 1:
			t.Fatalf("%q: net/http reads HTTP/%d.%d", data, req.ProtoMajor, req.ProtoMinor)
		case req.ContentLength != 0 || len(req.TransferEncoding) != 0 || req.Body != http.NoBody:
			t.Fatalf("%q: net/http reads a body", data)
		case req.Close:
			t.Fatalf("%q: net/http closes after it", data)
		case req.Host != r.Host || !httpguts.ValidHostHeader(req.Host):
			t.Fatalf("%q: Host %q, net/http %q", data, r.Host, req.Host)
		case !maps.EqualFunc(req.Header, r.Header, slices.Equal):
			t.Fatalf("%q: headers %q, net/http %q", data, r.Header, req.Header)
		}
		for k, vv := range req.Header {
			for _, v := range vv {
				if !httpguts.ValidHeaderFieldName(k) || !httpguts.ValidHeaderFieldValue(v) {
					t.Fatalf("%q: net/http's server refuses %s: %q", data, k, v)
				}
			}
		}
		if rest, _ := io.ReadAll(br); !bytes.Equal(rest, data[len(head):]) {
			t.Fatalf("%q: the next request starts at %q for the fast path, at %q for net/http", data, data[len(head):], rest)
		}
	})
}
