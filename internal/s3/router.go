package s3

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/kelpfs/kelp/internal/s3/sigv4"
)

// request is one S3 request after routing and authentication.
type request struct {
	w      http.ResponseWriter
	r      *http.Request
	ctx    context.Context
	q      url.Values
	bucket string
	key    string
	auth   *sigv4.Result
	id     *Identity     // nil: anonymous
	access *bucketAccess // the bucket's ACL and policy, loaded by authorize
}

// operation is what a request asks for and the permission it needs.
type operation struct {
	name   string
	action Action
	fn     func(s *Server, rq *request) error
}

// virtualBucket returns the bucket named by a virtual-hosted-style Host.
func (s *Server) virtualBucket(host string) (string, bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(host)
	for _, d := range s.cfg.Domains {
		if b, ok := strings.CutSuffix(host, "."+strings.ToLower(d)); ok && b != "" {
			return b, true
		}
	}
	return "", false
}

// bucketAndKey splits the request target into bucket and key, by Host
// (virtual-hosted style) or by path.
func (s *Server) bucketAndKey(r *http.Request) (string, string) {
	p := strings.TrimPrefix(r.URL.Path, "/")
	if b, ok := s.virtualBucket(r.Host); ok {
		return b, p
	}
	b, k, _ := strings.Cut(p, "/")
	return b, k
}

// ServeHTTP routes, authenticates, authorises and runs one request.
func (s *Server) ServeHTTP(hw http.ResponseWriter, r *http.Request) {
	if strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		// Answer "100 Continue" at once, as S3 does, also for an empty body
		// (net/http sends none then): botocore reads a final answer where it
		// waits for the interim one as the end of the exchange and leaves
		// bytes on the connection that break the next request on it, which
		// then hangs until the client's read timeout. Sending it here rather
		// than on the handler's first read also keeps botocore's one-second
		// wait from running out while the gateway does slow work.
		if r.ContentLength == 0 {
			hw.WriteHeader(http.StatusContinue)
		} else {
			r.Body.Read(nil) // net/http sends 100 Continue on the first read
		}
	}
	if r.Method == http.MethodGet && r.URL.Path == "/healthz" && r.Header.Get("Authorization") == "" && r.URL.RawQuery == "" {
		// Liveness for load balancers and scripts, like every Kelp server.
		// A signed request for a bucket named "healthz" still reaches S3.
		hw.Write([]byte("ok\n"))
		return
	}
	w := &trackingWriter{ResponseWriter: hw}
	id := s.requestID()
	h := w.Header()
	h.Set("x-amz-request-id", id)
	h.Set("x-amz-id-2", id)
	h.Set("Server", "Kelp")
	bucket, key := s.bucketAndKey(r)
	rq := &request{w: w, r: r, ctx: r.Context(), q: r.URL.Query(), bucket: bucket, key: key}
	if r.Method == http.MethodOptions {
		s.writeIfError(rq, s.preflight(rq))
		return
	}
	res, err := s.verifier.Verify(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if res.SessionToken != "" {
		s.writeError(w, r, errInvalidToken)
		return
	}
	rq.auth = res
	if !res.Anonymous {
		rq.id = s.lookup(res.AccessKey)
		if rq.id == nil { // removed by a reload since Verify
			s.writeError(w, r, sigv4.ErrInvalidAccessKeyID)
			return
		}
	}
	op, err := route(rq)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.authorize(rq, op.name, op.action, bucket, key); err != nil {
		s.writeError(w, r, err)
		return
	}
	if r.Header.Get("Origin") != "" && bucket != "" {
		s.corsHeaders(rq)
	}
	s.writeIfError(rq, op.fn(s, rq))
}

// writeIfError sends err unless it is nil or the response has begun, in
// which case the connection is cut so the client sees a failed transfer.
func (s *Server) writeIfError(rq *request, err error) {
	if err == nil {
		return
	}
	if sw, ok := rq.w.(interface{ started() bool }); ok && sw.started() {
		panic(http.ErrAbortHandler)
	}
	s.writeError(rq.w, rq.r, err)
}

// trackingWriter remembers whether the response has begun.
type trackingWriter struct {
	http.ResponseWriter
	wrote bool
}

func (t *trackingWriter) WriteHeader(code int) {
	t.wrote = true
	t.ResponseWriter.WriteHeader(code)
}

func (t *trackingWriter) Write(p []byte) (int, error) {
	t.wrote = true
	return t.ResponseWriter.Write(p)
}

func (t *trackingWriter) started() bool { return t.wrote }

// Unwrap lets http.ResponseController reach the connection.
func (t *trackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

func has(q url.Values, name string) bool { _, ok := q[name]; return ok }

// route picks the operation from method, bucket, key and sub-resource.
func route(rq *request) (*operation, error) {
	q, m := rq.q, rq.r.Method
	switch {
	case rq.bucket == "":
		if m == http.MethodGet {
			return &operation{"ListBuckets", "", (*Server).listBuckets}, nil
		}
		return nil, errMethodNotAllowed
	case rq.key == "":
		return routeBucket(m, q)
	}
	return routeObject(rq, m, q)
}

func routeBucket(m string, q url.Values) (*operation, error) {
	switch m {
	case http.MethodGet:
		switch {
		case has(q, "location"):
			return &operation{"GetBucketLocation", ActionList, (*Server).getBucketLocation}, nil
		case has(q, "versioning"):
			return &operation{"GetBucketVersioning", ActionList, (*Server).getBucketVersioning}, nil
		case has(q, "tagging"):
			return &operation{"GetBucketTagging", ActionTagging, (*Server).getBucketTagging}, nil
		case has(q, "cors"):
			return &operation{"GetBucketCors", ActionList, (*Server).getBucketCORS}, nil
		case has(q, "acl"):
			return &operation{"GetBucketAcl", ActionList, (*Server).getBucketACL}, nil
		case has(q, "uploads"):
			return &operation{"ListMultipartUploads", ActionList, (*Server).listUploads}, nil
		case has(q, "versions"):
			return &operation{"ListObjectVersions", ActionList, (*Server).listObjectVersions}, nil
		case has(q, "policy"):
			return &operation{"GetBucketPolicy", ActionAdmin, (*Server).getBucketPolicy}, nil
		case has(q, "lifecycle"):
			return &operation{"GetBucketLifecycle", ActionList, fail(errNoSuchLifecycle)}, nil
		case has(q, "encryption"):
			return &operation{"GetBucketEncryption", ActionList, fail(errNoSuchEncryption)}, nil
		case has(q, "object-lock"):
			return &operation{"GetObjectLockConfiguration", ActionList, fail(errNoSuchObjectLock)}, nil
		case has(q, "website"):
			return &operation{"GetBucketWebsite", ActionList, fail(errNoSuchWebsite)}, nil
		case has(q, "policyStatus"), has(q, "replication"), has(q, "logging"), has(q, "notification"),
			has(q, "ownershipControls"), has(q, "requestPayment"), has(q, "accelerate"), has(q, "analytics"),
			has(q, "inventory"), has(q, "metrics"), has(q, "intelligent-tiering"), has(q, "publicAccessBlock"):
			return &operation{"GetBucketConfiguration", ActionList, fail(errNotImplemented)}, nil
		case q.Get("list-type") == "2":
			return &operation{"ListObjectsV2", ActionList, (*Server).listObjectsV2}, nil
		}
		return &operation{"ListObjects", ActionList, (*Server).listObjectsV1}, nil
	case http.MethodHead:
		return &operation{"HeadBucket", ActionList, (*Server).headBucket}, nil
	case http.MethodPut:
		switch {
		case has(q, "versioning"):
			return &operation{"PutBucketVersioning", ActionAdmin, (*Server).putBucketVersioning}, nil
		case has(q, "tagging"):
			return &operation{"PutBucketTagging", ActionTagging, (*Server).putBucketTagging}, nil
		case has(q, "cors"):
			return &operation{"PutBucketCors", ActionAdmin, (*Server).putBucketCORS}, nil
		case has(q, "acl"):
			return &operation{"PutBucketAcl", ActionAdmin, (*Server).putBucketACL}, nil
		case has(q, "policy"):
			return &operation{"PutBucketPolicy", ActionAdmin, (*Server).putBucketPolicy}, nil
		case len(q) > 0 && !onlyIgnorable(q):
			return &operation{"PutBucketConfiguration", ActionAdmin, fail(errNotImplemented)}, nil
		}
		return &operation{"CreateBucket", ActionAdmin, (*Server).createBucket}, nil
	case http.MethodDelete:
		switch {
		case has(q, "tagging"):
			return &operation{"DeleteBucketTagging", ActionTagging, (*Server).deleteBucketTagging}, nil
		case has(q, "cors"):
			return &operation{"DeleteBucketCors", ActionAdmin, (*Server).deleteBucketCORS}, nil
		case has(q, "policy"):
			return &operation{"DeleteBucketPolicy", ActionAdmin, (*Server).deleteBucketPolicy}, nil
		case len(q) > 0 && !onlyIgnorable(q):
			return &operation{"DeleteBucketConfiguration", ActionAdmin, fail(errNotImplemented)}, nil
		}
		return &operation{"DeleteBucket", ActionAdmin, (*Server).deleteBucket}, nil
	case http.MethodPost:
		if has(q, "delete") {
			return &operation{"DeleteObjects", ActionWrite, (*Server).deleteObjects}, nil
		}
		return nil, errNotImplemented // browser POST uploads
	}
	return nil, errMethodNotAllowed
}

// onlyIgnorable reports whether a query holds only presigning parameters
// (X-Amz-*) and the like, which do not select a sub-resource.
func onlyIgnorable(q url.Values) bool {
	for k := range q {
		if !strings.HasPrefix(k, "X-Amz-") && !strings.HasPrefix(k, "x-amz-") && k != "AWSAccessKeyId" && k != "Signature" && k != "Expires" && k != "x-id" {
			return false
		}
	}
	return true
}

func routeObject(rq *request, m string, q url.Values) (*operation, error) {
	switch m {
	case http.MethodGet:
		switch {
		case has(q, "uploadId"):
			return &operation{"ListParts", ActionWrite, (*Server).listParts}, nil
		case has(q, "tagging"):
			return &operation{"GetObjectTagging", ActionTagging, (*Server).getObjectTagging}, nil
		case has(q, "acl"):
			return &operation{"GetObjectAcl", ActionRead, (*Server).getObjectACL}, nil
		case has(q, "attributes"), has(q, "retention"), has(q, "legal-hold"), has(q, "torrent"):
			return &operation{"GetObjectConfiguration", ActionRead, fail(errNotImplemented)}, nil
		}
		return &operation{"GetObject", ActionRead, (*Server).getObject}, nil
	case http.MethodHead:
		return &operation{"HeadObject", ActionRead, (*Server).headObject}, nil
	case http.MethodPut:
		switch {
		case has(q, "uploadId") && has(q, "partNumber"):
			if rq.r.Header.Get("x-amz-copy-source") != "" {
				return &operation{"UploadPartCopy", ActionWrite, (*Server).uploadPartCopy}, nil
			}
			return &operation{"UploadPart", ActionWrite, (*Server).uploadPart}, nil
		case has(q, "tagging"):
			return &operation{"PutObjectTagging", ActionTagging, (*Server).putObjectTagging}, nil
		case has(q, "acl"):
			return &operation{"PutObjectAcl", ActionWrite, (*Server).putObjectACL}, nil
		case has(q, "retention"), has(q, "legal-hold"):
			return &operation{"PutObjectConfiguration", ActionWrite, fail(errNotImplemented)}, nil
		case rq.r.Header.Get("x-amz-copy-source") != "":
			return &operation{"CopyObject", ActionWrite, (*Server).copyObject}, nil
		}
		return &operation{"PutObject", ActionWrite, (*Server).putObject}, nil
	case http.MethodPost:
		switch {
		case has(q, "uploads"):
			return &operation{"CreateMultipartUpload", ActionWrite, (*Server).createUpload}, nil
		case has(q, "uploadId"):
			return &operation{"CompleteMultipartUpload", ActionWrite, (*Server).completeUpload}, nil
		}
		return nil, errNotImplemented
	case http.MethodDelete:
		switch {
		case has(q, "uploadId"):
			return &operation{"AbortMultipartUpload", ActionWrite, (*Server).abortUpload}, nil
		case has(q, "tagging"):
			return &operation{"DeleteObjectTagging", ActionTagging, (*Server).deleteObjectTagging}, nil
		}
		return &operation{"DeleteObject", ActionWrite, (*Server).deleteObject}, nil
	}
	return nil, errMethodNotAllowed
}

func fail(err error) func(*Server, *request) error {
	return func(*Server, *request) error { return err }
}
