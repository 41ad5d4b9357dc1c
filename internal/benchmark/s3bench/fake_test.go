package s3bench

import (
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeS3 is an in-memory S3 endpoint with just the operations the
// benchmark uses, path-style, counting what it was asked.
type fakeS3 struct {
	mu      sync.Mutex
	objects map[string][]byte         // "bucket/key"
	uploads map[string]map[int][]byte // upload id -> part number -> bytes
	buckets map[string]bool

	puts, parts, completes, gets, rangedGets, deletes atomic.Int64
	unsignedPayloads, signedPayloads                  atomic.Int64
	sseC, sseS3                                       atomic.Int64 // requests with SSE-C keys, with x-amz-server-side-encryption: AES256
	// failPut fails the PUT of keys ending in it with a 500; corrupt flips a
	// byte in GET responses of keys ending in it.
	failPut, corrupt string
}

func newFakeS3(t *testing.T) (*fakeS3, *httptest.Server) {
	f := &fakeS3{objects: map[string][]byte{}, uploads: map[string]map[int][]byte{}, buckets: map[string]bool{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AK/") {
		http.Error(w, "unsigned", http.StatusForbidden)
		return
	}
	if r.Header.Get("X-Amz-Server-Side-Encryption-Customer-Key") != "" {
		f.sseC.Add(1)
	}
	if r.Header.Get("X-Amz-Server-Side-Encryption") == "AES256" {
		f.sseS3.Add(1)
	}
	if r.Header.Get("X-Amz-Content-Sha256") == "UNSIGNED-PAYLOAD" {
		f.unsignedPayloads.Add(1)
	} else {
		f.signedPayloads.Add(1)
	}
	path := strings.TrimPrefix(r.URL.Path, "/")
	bucket, key, _ := strings.Cut(path, "/")
	q := r.URL.Query()
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case key == "" && r.Method == http.MethodPut:
		f.buckets[bucket] = true
	case key == "" && r.Method == http.MethodPost && q.Has("delete"):
		var req struct {
			Objects []struct{ Key string } `xml:"Object"`
		}
		if err := xml.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		for _, o := range req.Objects {
			delete(f.objects, bucket+"/"+o.Key)
			f.deletes.Add(1)
		}
		fmt.Fprint(w, `<DeleteResult></DeleteResult>`)
	case !f.buckets[bucket]:
		w.WriteHeader(404)
		fmt.Fprint(w, `<Error><Code>NoSuchBucket</Code></Error>`)
	case r.Method == http.MethodPost && q.Has("uploads"):
		id := strconv.Itoa(len(f.uploads) + 1)
		f.uploads[id] = map[int][]byte{}
		fmt.Fprintf(w, `<InitiateMultipartUploadResult><Bucket>%s</Bucket><Key>%s</Key><UploadId>%s</UploadId></InitiateMultipartUploadResult>`, bucket, key, id)
	case r.Method == http.MethodPut && q.Has("uploadId"):
		n, _ := strconv.Atoi(q.Get("partNumber"))
		b, _ := io.ReadAll(r.Body)
		f.uploads[q.Get("uploadId")][n] = b
		f.parts.Add(1)
		w.Header().Set("ETag", fmt.Sprintf(`"part%d"`, n))
	case r.Method == http.MethodPost && q.Has("uploadId"):
		parts := f.uploads[q.Get("uploadId")]
		nums := make([]int, 0, len(parts))
		for n := range parts {
			nums = append(nums, n)
		}
		sort.Ints(nums)
		var all []byte
		for _, n := range nums {
			all = append(all, parts[n]...)
		}
		f.objects[path] = all
		f.completes.Add(1)
		fmt.Fprintf(w, `<CompleteMultipartUploadResult><Key>%s</Key><ETag>"x-%d"</ETag></CompleteMultipartUploadResult>`, key, len(nums))
	case r.Method == http.MethodPut:
		b, _ := io.ReadAll(r.Body)
		if f.failPut != "" && strings.HasSuffix(key, f.failPut) {
			w.WriteHeader(500)
			fmt.Fprint(w, `<Error><Code>InternalError</Code></Error>`)
			return
		}
		f.objects[path] = b
		f.puts.Add(1)
		w.Header().Set("ETag", `"e"`)
	case r.Method == http.MethodGet:
		b, ok := f.objects[path]
		if !ok {
			w.WriteHeader(404)
			fmt.Fprint(w, `<Error><Code>NoSuchKey</Code></Error>`)
			return
		}
		f.gets.Add(1)
		status := 200
		if rg := r.Header.Get("Range"); rg != "" {
			var from, to int
			fmt.Sscanf(rg, "bytes=%d-%d", &from, &to)
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, to, len(b)))
			b, status = b[from:to+1], http.StatusPartialContent
			f.rangedGets.Add(1)
		}
		if f.corrupt != "" && strings.HasSuffix(key, f.corrupt) && len(b) > 0 {
			b = append([]byte(nil), b...)
			b[len(b)/2] ^= 1
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(status)
		w.Write(b)
	default:
		http.Error(w, "not implemented", 501)
	}
}
