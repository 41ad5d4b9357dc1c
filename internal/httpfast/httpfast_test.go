package httpfast

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"regexp"
	"testing"
	"time"
)

var dateLine = regexp.MustCompile(`(?m)^Date: [^\r\n]*\r$`)

// TestFrameSameAsNetHTTP frames the answers of a set of handlers with
// Answer and compares them with what net/http's server sends for the same
// handler, byte for byte (the Date aside); the answers Frame refuses are
// the ones it must refuse.
func TestFrameSameAsNetHTTP(t *testing.T) {
	const date = "Mon, 02 Jan 2006 15:04:05 GMT"
	cases := []struct {
		name  string
		h     http.HandlerFunc
		frame bool
		close bool
	}{
		{"json 201", func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Etag"] = []string{`"abc"`}
			w.Header()["Content-Type"] = []string{"application/json"}
			w.Header()["Content-Length"] = []string{"12"}
			w.WriteHeader(201)
			w.Write([]byte(`{"size":12}` + "\n"))
		}, true, false},
		{"no Content-Length", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("ok"))
		}, true, false},
		{"empty 200", func(w http.ResponseWriter, r *http.Request) {}, true, false},
		{"empty 404", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(404) }, true, false},
		{"two writes", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("a"))
			w.Write([]byte("b"))
		}, true, false},
		{"http.Error", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "bad", 400) }, true, false},
		{"panic answer", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Connection", "close")
			http.Error(w, "internal server error", 500)
		}, true, true},
		{"values to clean", func(w http.ResponseWriter, r *http.Request) {
			w.Header()["X-A"] = []string{"  spaced\t", "two\r\nlines", "bare\rcr"}
			w.Header()["x-lower"] = []string{"kept as set"}
			w.Header()["X-Empty"] = nil
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("x"))
		}, true, false},
		{"own Date", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Date", date)
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("x"))
		}, true, false},
		{"Date without value", func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Date"] = nil
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("x"))
		}, true, false},
		{"Content-Type without value", func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Content-Type"] = nil
			w.Write([]byte("<html>"))
		}, true, false},
		{"WriteHeader twice", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(409)
			w.WriteHeader(200)
		}, true, false},
		{"sniffed type", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>")) }, false, false},
		{"wrong Content-Length", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Length", "5")
			w.Write([]byte("x"))
		}, false, false},
		{"Content-Length without value", func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Content-Length"] = nil
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("x"))
		}, false, false},
		{"large without length", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Write(bytes.Repeat([]byte("x"), 4000))
		}, false, false},
		{"204", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }, false, false},
		{"304", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(304) }, false, false},
		{"103 first", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(103); w.WriteHeader(200) }, false, false},
		{"unknown status", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(299) }, false, false},
		{"Transfer-Encoding", func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Transfer-Encoding", "chunked") }, false, false},
		{"Trailer", func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Trailer", "X") }, false, false},
		{"Connection keep-alive", func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Connection", "keep-alive") }, false, false},
		{"bad header name", func(w http.ResponseWriter, r *http.Request) { w.Header()["Bad Name"] = []string{"x"} }, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAnswer()
			tc.h(a, httpRequest())
			got, closeAfter, err := a.Frame([]byte("kept:"))
			if (err == nil) != tc.frame {
				t.Fatalf("Frame: %v, want framed %v", err, tc.frame)
			}
			if err != nil {
				return
			}
			if closeAfter != tc.close {
				t.Errorf("closeAfter %v, want %v", closeAfter, tc.close)
			}
			if !bytes.HasPrefix(got, []byte("kept:")) {
				t.Fatalf("Frame dropped what out held: %q", got)
			}
			want := serve(t, tc.h)
			if g, w := dateLine.ReplaceAll(got[5:], []byte("Date: -\r")), dateLine.ReplaceAll(want, []byte("Date: -\r")); !bytes.Equal(g, w) {
				t.Errorf("Frame:    %q\nnet/http: %q", g, w)
			}
		})
	}
}

func httpRequest() *http.Request {
	r, _ := http.NewRequest("GET", "/", nil)
	return r
}

// serve returns what net/http's server sends h's answer to one request
// as: the request is sent with the sending side closed after it, so the
// server closes the connection after the answer.
func serve(t *testing.T, h http.Handler) []byte {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	defer srv.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	c.(*net.TCPConn).CloseWrite()
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestHeadEnd(t *testing.T) {
	for _, tc := range []struct {
		in  string
		end int
		ok  bool
	}{
		{"GET / HTTP/1.1\r\nHost: x\r\n\r\nrest", len("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), true},
		{"GET / HTTP/1.1\r\nHost: x\r\n", 0, true},
		{"GET / HTTP/1.1\r\nHost: x\r", 0, true},
		{"GET / HTTP/1.1\nHost: x\n\n", 0, false},
		{"GET / HTTP/1.1\r\nHost: x\rx\r\n\r\n", 0, false},
		{"GET / HTTP/1.1\r\nHost: \x00\r\n\r\n", 0, false},
		{"GET / HTTP/1.1\r\nUser-Agent: caf\xc3\xa9\tx\r\n\r\n", len("GET / HTTP/1.1\r\nUser-Agent: caf\xc3\xa9\tx\r\n\r\n"), true},
	} {
		end, _, ok := HeadEnd([]byte(tc.in), 0)
		if end != tc.end || ok != tc.ok {
			t.Errorf("%q: %d %v, want %d %v", tc.in, end, ok, tc.end, tc.ok)
		}
	}
	if !PrefixOf([]byte("GE"), "GET ") || PrefixOf([]byte("GX"), "GET ") {
		t.Error("PrefixOf")
	}
}

// A PrefixConn reads its pending bytes first, through Read and through
// io.Copy alike (the TCP connection's own WriteTo would skip them).
func TestPrefixConnPending(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		io.WriteString(c, "rest")
		c.Close()
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pc := (&PrefixConn{Conn: c}).Rest([]byte("pending "))
	var b bytes.Buffer
	if _, err := io.Copy(&b, pc); err != nil || b.String() != "pending rest" {
		t.Fatalf("%q, %v", b.String(), err)
	}
}
