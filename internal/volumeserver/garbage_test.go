package volumeserver_test

import (
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/testcluster"
)

// Random requests against the data path: file ids valid, foreign,
// malformed or pointing at other volumes, with odd headers and bodies.
// None gets a 5xx, and an acknowledged file stays readable.
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
		if hdr["Content-Length"] != "" {
			body = "12" // shorter than declared
		}
		req, err := http.NewRequest(method, target, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		if hdr["Content-Length"] != "" {
			req.ContentLength = 5
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue // a body shorter than its length: the client gives up
		}
		out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		resp.Body.Close()
		if resp.StatusCode >= 500 && resp.StatusCode != http.StatusInsufficientStorage {
			t.Errorf("request %d: %s %s %v: %d %.200s", i, method, target, hdr, resp.StatusCode, out)
		}
	}
	if r := do(t, "GET", keep, nil, nil); r.status != http.StatusOK || string(r.body) != "precious" {
		t.Fatalf("acknowledged file after the garbage: %d %q", r.status, r.body)
	}
}
