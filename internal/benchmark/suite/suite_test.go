package suite

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kelpfs/kelp/internal/benchmark/s3bench"
)

// fakeFiler stores PUT bodies and multipart file parts by path, serves them
// back and deletes recursively: enough to drive the filer workloads.
type fakeFiler struct {
	mu    sync.Mutex
	files map[string][]byte
}

func (f *fakeFiler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r.Method {
	case "PUT":
		b, _ := io.ReadAll(r.Body)
		f.files[r.URL.Path] = b
		w.WriteHeader(201)
	case "POST":
		mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		mr, err := r.MultipartReader()
		if mt != "multipart/form-data" || err != nil {
			http.Error(w, "not a form", 400)
			return
		}
		part, err := mr.NextPart()
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		b, _ := io.ReadAll(part)
		f.files[r.URL.Path+part.FileName()] = b
		w.WriteHeader(201)
	case "GET":
		b, ok := f.files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	case "DELETE":
		for k := range f.files {
			if strings.HasPrefix(k, r.URL.Path+"/") {
				delete(f.files, k)
			}
		}
		w.WriteHeader(204)
	}
}

// TestSuiteSmoke runs the harness at its smallest against a fake filer:
// the limits are measured, the filer rows are filled and the table prints.
func TestSuiteSmoke(t *testing.T) {
	ff := &fakeFiler{files: map[string][]byte{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: ff}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	var out bytes.Buffer
	res, err := Run(context.Background(), Config{Filer: ln.Addr().String(), Scale: 0.0001, Dir: t.TempDir(), Concurrency: 4, Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if res.DiskMBps <= 0 || res.TCPMBps <= 0 || len(res.Rows) != 3 || res.MultipartToPut <= 0 {
		t.Fatalf("result %+v", res)
	}
	for _, r := range res.Rows {
		if r.Phase.Requests != 200 || r.Ratio <= 0 {
			t.Errorf("row %+v", r)
		}
	}
	if len(ff.files) != 0 {
		t.Errorf("%d files left after the run", len(ff.files))
	}
	for _, want := range []string{"filer multipart POST 64 KiB", "of disk", "of tcp", "multipart POST / PUT"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// TestListPagesFollowsTokens lists 2,500 keys from a fake ListObjectsV2
// whose continuation tokens need XML escaping: every page is asked for with
// the token the previous one gave, unescaped, and every key is counted.
func TestListPagesFollowsTokens(t *testing.T) {
	const n = 2500
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/bkt" || q.Get("list-type") != "2" || q.Get("prefix") != "p/" || !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
			http.Error(w, "unexpected request "+r.URL.String(), 400)
			return
		}
		tok := q.Get("continuation-token")
		asked = append(asked, tok)
		from := 0
		if tok != "" {
			from, _ = strconv.Atoi(strings.TrimPrefix(tok, "<&>"))
		}
		to := min(from+1000, n)
		fmt.Fprintf(w, "<ListBucketResult><IsTruncated>%v</IsTruncated>", to < n)
		for i := from; i < to; i++ {
			fmt.Fprintf(w, "<Contents><Key>p/%05d</Key></Contents>", i)
		}
		if to < n {
			fmt.Fprintf(w, "<NextContinuationToken>&lt;&amp;&gt;%d</NextContinuationToken>", to)
		}
		fmt.Fprint(w, "</ListBucketResult>")
	}))
	defer srv.Close()
	lat, keys, err := listPages(context.Background(), s3bench.Config{Endpoint: srv.URL, Bucket: "bkt", AccessKey: "ak", SecretKey: "sk"}, "p/")
	if err != nil {
		t.Fatal(err)
	}
	if keys != n || len(lat) != 3 || !slices.Equal(asked, []string{"", "<&>1000", "<&>2000"}) {
		t.Fatalf("%d keys in %d pages, tokens asked %q", keys, len(lat), asked)
	}
}
