package volumeserver_test

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/testcluster"
)

// Random requests against the data path: file ids valid, foreign,
// malformed or pointing at other volumes, with odd headers and bodies.
// Each gets an answer (a connection closed without one is a crashed
// handler), none a 5xx, and an acknowledged file stays readable.
func TestRandomRequestsNeverFail500(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}}})
	cl, err := client.New(client.Config{Masters: c.MasterAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	keep := assign(t, cl)
	if r := do(t, "PUT", keep, strings.NewReader("precious"), nil); r.status != http.StatusCreated {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	fresh := assign(t, cl)
	base := keep[:strings.LastIndexByte(keep, '/')]
	fid := keep[strings.LastIndexByte(keep, '/')+1:]
	rnd := rand.New(rand.NewPCG(8, 9))
	targets := []string{fresh, fresh + "?ts=abc", base + "/", base + "/x", base + "/1", base + "/1,", base + "/1,zz", base + "/99,0123456789",
		base + "/1,0123456789abcdef0123", base + "/" + fid + "x", base + "/0,01", base + "/4294967296,01", base + "/1,01/name.txt",
		base + "/-1,01", base + "/healthz", base + "/status"}
	methods := []string{"GET", "HEAD", "PUT", "POST", "DELETE", "PATCH"}
	headers := []map[string]string{nil, {"Range": "bytes=3-1"}, {"Range": "bytes=-0"}, {"Range": "lines=1-2"},
		{"Content-Type": "multipart/form-data; boundary=q"}, {"Content-Type": "multipart/form-data"},
		{"If-Modified-Since": "yesterday"}, {"Content-Length": "5"}, {"Content-Encoding": "gzip"}}
	bodies := []string{"", "x", "--q\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\n\r\nabc\r\n--q--\r\n", "--q\r\n", strings.Repeat("b", 3000)}
	for i := range 400 {
		method, target := methods[rnd.IntN(len(methods))], targets[rnd.IntN(len(targets))]
		hdr := headers[rnd.IntN(len(headers))]
		body := bodies[rnd.IntN(len(bodies))]
		req, err := http.NewRequest(method, target, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		var resp *http.Response
		if hdr["Content-Length"] != "" {
			resp, err = sendShortBody(req)
		} else {
			resp, err = http.DefaultClient.Do(req)
		}
		what := fmt.Sprintf("request %d: %s %s %v", i, method, target, hdr)
		if err != nil {
			// A closed connection without an answer: a handler crashed.
			t.Fatalf("%s: %v", what, err)
		}
		out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s: reading the answer: %v", what, err)
		}
		if resp.StatusCode >= 500 && resp.StatusCode != http.StatusInsufficientStorage {
			t.Errorf("%s: %d %.200s", what, resp.StatusCode, out)
		}
	}
	// An upload cut short always gets an answer, a 4xx: the client is gone
	// mid-body, not the server broken.
	for _, method := range []string{"PUT", "POST"} {
		req, _ := http.NewRequest(method, fresh, nil)
		resp, err := sendShortBody(req)
		if err != nil {
			t.Fatalf("%s cut short: %v", method, err)
		}
		if resp.StatusCode < 400 || resp.StatusCode >= 500 {
			t.Errorf("%s cut short: %d, want a 4xx", method, resp.StatusCode)
		}
	}
	if r := do(t, "GET", keep, nil, nil); r.status != http.StatusOK || string(r.body) != "precious" {
		t.Fatalf("acknowledged file after the garbage: %d %q", r.status, r.body)
	}
}

// sendShortBody sends req declaring 5 bytes of body but sending 2, then
// closing its side of the connection: a client that died mid-upload. Go's
// client refuses to send such a request, so it goes over a bare
// connection; the server must still answer.
func sendShortBody(req *http.Request) (*http.Response, error) {
	conn, err := net.Dial("tcp", req.URL.Host)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 5\r\n", req.Method, req.URL.RequestURI(), req.URL.Host)
	for k := range req.Header {
		if k != "Content-Length" {
			fmt.Fprintf(conn, "%s: %s\r\n", k, req.Header.Get(k))
		}
	}
	io.WriteString(conn, "\r\n12")
	conn.(*net.TCPConn).CloseWrite()
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body) // before the connection closes
	resp.Body = io.NopCloser(strings.NewReader(string(b)))
	return resp, err
}
