package sigv4

import (
	"crypto/md5"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

const (
	testAK = "AKIDKELPTEST"
	testSK = "kelp/secret+key=="
)

// recordingServer is a minimal S3 endpoint: it verifies each request,
// reads the body to EOF and remembers what it saw, answering just enough
// XML for SDK clients to be satisfied.
type recordingServer struct {
	t        *testing.T
	verifier *Verifier
	srv      *httptest.Server

	mu      sync.Mutex
	results []seen
}

type seen struct {
	method, path, query string
	res                 *Result
	err                 error // from Verify or from reading the body
	body                []byte
	trailer             http.Header
}

func newRecordingServer(t *testing.T, tls bool) *recordingServer {
	rs := &recordingServer{t: t, verifier: &Verifier{Creds: StaticCredentials{testAK: testSK}}}
	h := http.HandlerFunc(rs.serve)
	if tls {
		rs.srv = httptest.NewTLSServer(h)
	} else {
		rs.srv = httptest.NewServer(h)
	}
	t.Cleanup(rs.srv.Close)
	return rs
}

func (rs *recordingServer) serve(w http.ResponseWriter, r *http.Request) {
	s := seen{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery}
	s.res, s.err = rs.verifier.Verify(r)
	if s.err == nil {
		s.body, s.err = io.ReadAll(r.Body)
		s.trailer = s.res.Trailer()
	}
	rs.mu.Lock()
	rs.results = append(rs.results, s)
	rs.mu.Unlock()
	if s.err != nil {
		var e *Error
		status, code := http.StatusInternalServerError, "InternalError"
		if errors.As(s.err, &e) {
			status, code = e.Status, e.Code
		}
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		xml.NewEncoder(w).Encode(struct {
			XMLName xml.Name `xml:"Error"`
			Code    string
			Message string
		}{Code: code, Message: s.err.Error()})
		return
	}
	switch {
	case r.Method == http.MethodHead:
		w.WriteHeader(http.StatusNotFound) // nothing exists: clients upload without comparing
	case r.Method == http.MethodGet && r.URL.Query().Has("list-type"):
		w.Header().Set("Content-Type", "application/xml")
		io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><KeyCount>1</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated><Contents><Key>dir/x</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified><ETag>&quot;x&quot;</ETag><Size>1</Size><StorageClass>STANDARD</StorageClass></Contents></ListBucketResult>`)
	case r.Method == http.MethodGet && r.URL.Query().Has("location"):
		w.Header().Set("Content-Type", "application/xml")
		io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><LocationConstraint xmlns="http://s3.amazonaws.com/doc/2006-03-01/"/>`)
	case r.Method == http.MethodGet:
		w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
		io.WriteString(w, "hello")
	default:
		// Clients compare the ETag with their MD5 of what they sent.
		w.Header().Set("ETag", fmt.Sprintf(`"%x"`, md5.Sum(s.body)))
		w.WriteHeader(http.StatusOK)
	}
}

// take returns and forgets everything seen so far.
func (rs *recordingServer) take() []seen {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	out := rs.results
	rs.results = nil
	return out
}

// last returns the only request seen since the previous call, failing the
// test if there was not exactly one.
func (rs *recordingServer) last() seen {
	rs.t.Helper()
	all := rs.take()
	if len(all) != 1 {
		rs.t.Fatalf("server saw %d requests, want 1", len(all))
	}
	return all[0]
}

// trickyKeys are object keys that break naive canonicalisation.
var trickyKeys = []string{
	"plain.txt",
	"with space.txt",
	"plus+sign",
	"percent%20literal%",
	"tilde~and-under_score.dot",
	"unicode/ключ/日本語/é",
	"dir/sub dir/../x",
	"double//slash/",
	"sub-delims!$&'()*,;=:@",
	"question?hash#",
	"equals=and&amp",
	"emoji 🦀",
}
