package volumeserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/testcluster"
)

type reply struct {
	status int
	header http.Header
	body   []byte
}

func do(t *testing.T, method, url string, body io.Reader, header map[string]string) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, b}
}

// assign returns the URL of a fresh file id on the cluster's volume server.
func assign(t *testing.T, cl *client.Client) string {
	t.Helper()
	a, err := cl.Assign(context.Background(), client.AssignRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + a.URL + "/" + a.FID.String()
}

func TestDataPath(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}}, Fsync: true})
	cl, err := client.New(client.Config{Masters: c.MasterAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	content := []byte("0123456789abcdefghijklmnopqrstuvwxyz")

	t.Run("raw put, get, head, ranges, conditionals", func(t *testing.T) {
		url := assign(t, cl)
		r := do(t, "PUT", url, bytes.NewReader(content), map[string]string{"Content-Type": "text/plain"})
		if r.status != http.StatusCreated {
			t.Fatalf("PUT: %d %s", r.status, r.body)
		}
		var up struct {
			Size int64  `json:"size"`
			ETag string `json:"eTag"`
		}
		json.Unmarshal(r.body, &up)
		if up.Size != int64(len(content)) || up.ETag == "" {
			t.Fatalf("PUT answered %s", r.body)
		}
		g := do(t, "GET", url, nil, nil)
		if g.status != 200 || !bytes.Equal(g.body, content) || g.header.Get("Content-Type") != "text/plain" ||
			g.header.Get("ETag") != `"`+up.ETag+`"` || g.header.Get("Last-Modified") == "" {
			t.Fatalf("GET: %d %q %v", g.status, g.body, g.header)
		}
		h := do(t, "HEAD", url, nil, nil)
		if h.status != 200 || len(h.body) != 0 || h.header.Get("Content-Length") != fmt.Sprint(len(content)) {
			t.Fatalf("HEAD: %d %v", h.status, h.header)
		}
		for rng, want := range map[string]string{"bytes=0-3": "0123", "bytes=30-": "uvwxyz", "bytes=-2": "yz"} {
			g := do(t, "GET", url, nil, map[string]string{"Range": rng})
			if g.status != http.StatusPartialContent || string(g.body) != want {
				t.Errorf("Range %s: %d %q, want 206 %q", rng, g.status, g.body, want)
			}
		}
		if g := do(t, "GET", url, nil, map[string]string{"Range": "bytes=100-200"}); g.status != http.StatusRequestedRangeNotSatisfiable {
			t.Errorf("unsatisfiable range: %d", g.status)
		}
		if g := do(t, "GET", url, nil, map[string]string{"If-None-Match": `"` + up.ETag + `"`}); g.status != http.StatusNotModified {
			t.Errorf("If-None-Match with the ETag: %d, want 304", g.status)
		}
		lm := g.header.Get("Last-Modified")
		if g := do(t, "GET", url, nil, map[string]string{"If-Modified-Since": lm}); g.status != http.StatusNotModified {
			t.Errorf("If-Modified-Since Last-Modified: %d, want 304", g.status)
		}
		if g := do(t, "GET", url, nil, map[string]string{"If-Match": `"nope"`}); g.status != http.StatusPreconditionFailed {
			t.Errorf("If-Match mismatch: %d, want 412", g.status)
		}
	})

	t.Run("multipart keeps name and type", func(t *testing.T) {
		url := assign(t, cl)
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		mw.WriteField("other", "ignored")
		part, _ := mw.CreatePart(map[string][]string{
			"Content-Disposition": {`form-data; name="file"; filename="photo.jpg"`},
			"Content-Type":        {"image/jpeg"},
		})
		part.Write(content)
		mw.Close()
		r := do(t, "POST", url, &buf, map[string]string{"Content-Type": mw.FormDataContentType()})
		if r.status != http.StatusCreated {
			t.Fatalf("POST multipart: %d %s", r.status, r.body)
		}
		g := do(t, "GET", url, nil, nil)
		if !bytes.Equal(g.body, content) || g.header.Get("Content-Type") != "image/jpeg" ||
			!strings.Contains(g.header.Get("Content-Disposition"), `filename=photo.jpg`) {
			t.Fatalf("GET after multipart: %q %v", g.body, g.header)
		}
	})

	t.Run("chunked body of unknown length", func(t *testing.T) {
		url := assign(t, cl)
		big := bytes.Repeat([]byte("x"), 3<<20) // spooled to a file past 1 MiB
		req, _ := http.NewRequest("PUT", url, io.MultiReader(bytes.NewReader(big)))
		req.ContentLength = -1
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("chunked PUT: %v %v", resp.StatusCode, err)
		}
		resp.Body.Close()
		if g := do(t, "GET", url, nil, nil); !bytes.Equal(g.body, big) {
			t.Fatalf("chunked body read back %d bytes", len(g.body))
		}
	})

	t.Run("delete, then 404", func(t *testing.T) {
		url := assign(t, cl)
		do(t, "PUT", url, bytes.NewReader(content), nil)
		if r := do(t, "DELETE", url, nil, nil); r.status != http.StatusAccepted {
			t.Fatalf("DELETE: %d %s", r.status, r.body)
		}
		if r := do(t, "GET", url, nil, nil); r.status != http.StatusNotFound {
			t.Fatalf("GET after DELETE: %d", r.status)
		}
		if r := do(t, "DELETE", url, nil, nil); r.status != http.StatusNotFound {
			t.Fatalf("second DELETE: %d", r.status)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		url := assign(t, cl)
		do(t, "PUT", url, bytes.NewReader(content), nil)
		base := url[:strings.LastIndexByte(url, '/')+1]
		id := url[len(base):]
		wrongCookie := id[:len(id)-1] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", id[len(id)-1])+1)%16])
		cases := []struct {
			method, path string
			want         int
		}{
			{"GET", "not-a-fid", 400},
			{"GET", "3,zz", 400},
			{"GET", "999,0100000000", 404},
			{"GET", wrongCookie, 404},
			{"PUT", wrongCookie, 404},
			{"PATCH", id, 405},
		}
		for _, tc := range cases {
			r := do(t, tc.method, base+tc.path, strings.NewReader("x"), nil)
			var e struct{ Error string }
			if r.status != tc.want || json.Unmarshal(r.body, &e) != nil || e.Error == "" {
				t.Errorf("%s /%s: %d %s, want %d with a JSON error", tc.method, tc.path, r.status, r.body, tc.want)
			}
		}
		if r := do(t, "GET", url, nil, nil); !bytes.Equal(r.body, content) {
			t.Fatal("a refused overwrite damaged the stored file")
		}
		if r := do(t, "GET", base+"healthz", nil, nil); r.status != 200 {
			t.Errorf("/healthz: %d", r.status)
		}
	})

	t.Run("replicated delete to a server without the volume fails", func(t *testing.T) {
		// The primary takes a replica's 404 as "this copy never had the
		// needle" and reports the delete done; a server that lacks the whole
		// volume (a copy still being moved there, say) cannot vouch for that.
		url := assign(t, cl)
		base := url[:strings.LastIndexByte(url, '/')+1]
		r := do(t, "DELETE", base+"999,0100000000?type=replicate", nil, nil)
		if r.status != http.StatusServiceUnavailable {
			t.Fatalf("replicated DELETE on a missing volume: %d %s, want 503", r.status, r.body)
		}
		if r := do(t, "DELETE", base+"999,0100000000", nil, nil); r.status != http.StatusNotFound {
			t.Fatalf("client DELETE on a missing volume: %d %s, want 404", r.status, r.body)
		}
	})
}
