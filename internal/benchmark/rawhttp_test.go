package benchmark

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kelpfs/kelp/internal/client/clienttest"
)

// readAnswer reads the same status, body and connection reuse from an
// answer's bytes as net/http's client (http.ReadResponse), and fails where
// net/http fails, for well-formed answers and malformed ones alike.
func TestRawAnswerSameAsNetHTTP(t *testing.T) {
	const body = "0123456789abcdef"
	for _, tc := range []struct {
		name, answer string
		malformed    bool // readAnswer refuses it (net/http may be lenient)
		interim      bool // net/http's Transport skips the first answer, a 1xx
	}{
		{name: "length", answer: "HTTP/1.1 200 OK\r\nContent-Length: 16\r\nContent-Type: x\r\n\r\n" + body},
		{name: "lower-case header", answer: "HTTP/1.1 200 OK\r\ncontent-length:16\r\n\r\n" + body},
		{name: "no reason", answer: "HTTP/1.1 201\r\nContent-Length: 16\r\n\r\n" + body},
		{name: "empty", answer: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
		{name: "not found", answer: "HTTP/1.1 404 Not Found\r\nContent-Length: 11\r\n\r\nnot found\r\n"},
		{name: "close", answer: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 16\r\n\r\n" + body},
		{name: "close token", answer: "HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 16\r\n\r\n" + body},
		{name: "chunked", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\n012345\r\na;ext=1\r\n6789abcdef\r\n0\r\nTrailer: x\r\n\r\n"},
		{name: "to the end", answer: "HTTP/1.1 200 OK\r\n\r\n" + body},
		{name: "HTTP/1.0", answer: "HTTP/1.0 200 OK\r\nContent-Length: 16\r\n\r\n" + body},
		{name: "HTTP/1.0 keep-alive", answer: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 16\r\n\r\n" + body},
		{name: "interim", answer: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 16\r\n\r\n" + body, interim: true},
		{name: "no content", answer: "HTTP/1.1 204 No Content\r\n\r\n"},
		{name: "long body", answer: "HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n" + strings.Repeat("x", 40)},
		{name: "short body", answer: "HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n" + body},
		{name: "cut chunk", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n0123"},
		{name: "two lengths", answer: "HTTP/1.1 200 OK\r\nContent-Length: 16\r\nContent-Length: 17\r\n\r\n" + body},
		{name: "bad length", answer: "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n" + body},
		{name: "negative length", answer: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n" + body},
		{name: "bad status", answer: "HTTP/1.1 2x0 OK\r\nContent-Length: 16\r\n\r\n" + body},
		{name: "not http", answer: "SSH-2.0-OpenSSH\r\n\r\n"},
		{name: "gzip coding", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n" + body},
		{name: "bad chunk size", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"},
		{name: "bare LF", answer: "HTTP/1.1 200 OK\nContent-Length: 16\n\n" + body, malformed: true},
		{name: "space in name", answer: "HTTP/1.1 200 OK\r\nContent Length: 16\r\n\r\n" + body, malformed: true},
		{name: "nothing", answer: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// net/http's reading of the answer.
			br := bufio.NewReader(strings.NewReader(tc.answer))
			resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
			if tc.interim && err == nil {
				resp, err = http.ReadResponse(br, &http.Request{Method: "GET"})
			}
			var want []byte
			wantOK := err == nil
			if err == nil {
				want, err = io.ReadAll(resp.Body)
				wantOK = err == nil
			}
			// readAnswer's, into a buffer one byte longer than the body.
			dst := make([]byte, len(body)+1)
			a, keep, gotErr := readAnswer(bufio.NewReader(strings.NewReader(tc.answer)), false, dst)
			gotOK := gotErr == nil
			if tc.malformed {
				if gotOK {
					t.Fatalf("readAnswer took a malformed answer: %+v", a)
				}
				return
			}
			if gotOK != wantOK {
				t.Fatalf("readAnswer error %v, net/http error %v", gotErr, err)
			}
			if !gotOK {
				return
			}
			if a.status != resp.StatusCode {
				t.Errorf("status %d, net/http %d", a.status, resp.StatusCode)
			}
			if a.length != int64(len(want)) || !bytes.HasPrefix(want, dst[:a.n]) || a.n != min(len(want), len(dst)) {
				t.Errorf("body %q (length %d), net/http %q", dst[:a.n], a.length, want)
			}
			if wantKeep := !resp.Close; keep != wantKeep {
				t.Errorf("keep-alive %v, net/http %v", keep, wantKeep)
			}
		})
	}
}

// The lean client reuses one connection per server for request after
// request, sends what net/http's server reads as the request (method,
// target, Host, headers, body), replaces a kept-alive connection the server
// closed while idle, and gives up on a server that does not answer; in
// plain HTTP and over TLS.
func TestRawConnsAgainstNetHTTP(t *testing.T) {
	for _, secure := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[secure], func(t *testing.T) { testRawConns(t, secure) })
	}
}

func testRawConns(t *testing.T, secure bool) {
	var conns, requests atomic.Int32
	slow := make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		b, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/echo":
			io.WriteString(w, r.Method+" "+r.URL.RequestURI()+" "+r.Host+" "+r.Header.Get("X-A")+" "+string(b))
		case "/close":
			w.Header().Set("Connection", "close")
			io.WriteString(w, "bye")
		case "/slow":
			slow <- struct{}{}
			<-r.Context().Done()
		}
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	var tlsConfig *tls.Config
	if secure {
		srv.StartTLS()
		tlsConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig
	} else {
		srv.Start()
	}
	defer srv.Close()
	_, host, _ := strings.Cut(srv.URL, "://")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rs := newRawConns(ctx, tlsConfig)
	defer rs.closeAll()
	dst := make([]byte, 256)
	for i := range 5 {
		a, err := rs.do(host, "PUT", "/echo?x=1", "X-A: b\r\n", []byte("body"), dst)
		if err != nil {
			t.Fatal(err)
		}
		want := "PUT /echo?x=1 " + host + " b body"
		if a.status != 200 || string(dst[:a.n]) != want || a.length != int64(len(want)) {
			t.Fatalf("request %d: %d %q, want %q", i, a.status, dst[:a.n], want)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 5 requests, want 1", n)
	}
	// An answer with Connection: close is read whole, the next request
	// goes on a new connection.
	if a, err := rs.do(host, "GET", "/close", "", nil, dst); err != nil || string(dst[:a.n]) != "bye" {
		t.Fatalf("close: %+v %v", a, err)
	}
	if _, err := rs.do(host, "GET", "/echo", "", nil, dst); err != nil || conns.Load() != 2 {
		t.Fatalf("after close: %v, %d connections", err, conns.Load())
	}
	// The server closes the idle connection: the next request is sent
	// again on a new one, once.
	srv.CloseClientConnections()
	before := requests.Load()
	if a, err := rs.do(host, "GET", "/echo", "", nil, dst); err != nil || a.status != 200 {
		t.Fatalf("after the server closed the connection: %+v %v", a, err)
	}
	if n := requests.Load() - before; n != 1 {
		t.Fatalf("%d requests served, want 1", n)
	}
	// The run's end breaks a request under way.
	go func() {
		<-slow
		cancel()
	}()
	if _, err := rs.do(host, "GET", "/slow", "", nil, dst); !errors.Is(err, context.Canceled) {
		t.Fatalf("a request when the run ended: %v", err)
	}
}

// --net-http still measures through the library client, with the same
// checks and one assign per file.
func TestRunNetHTTP(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Servers: 2, Volumes: 4})
	rep, err := Run(context.Background(), Config{Masters: []string{cl.Master.URL}, N: 50, Size: 100, Concurrency: 4, NetHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed() != 0 || rep.Write.Requests != 50 || rep.Read.Requests != 50 {
		t.Fatalf("%+v", rep)
	}
	if n := cl.Master.Assigns.Load(); n != 50 {
		t.Fatalf("%d assigns, want 50", n)
	}
}
