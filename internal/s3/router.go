package s3

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/metrics"
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
	// selfAuthorized: fn authorizes the request itself, because the
	// credentials are in the body (browser form uploads).
	selfAuthorized bool
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
	if s.cfg.Audit != nil && r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions {
		defer s.audit(w, rq)
	}
	expect := expectsContinue(r)
	if expect {
		// Until the body is invited, a refusal must close the connection:
		// the client may still send the body, or nothing.
		h.Set("Connection", "close")
	}
	body := r.Body // Verify may wrap it; the interim answer is the server's
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
	metrics.SetOperation(hw, op.name)
	if r.Header.Get("Origin") != "" && bucket != "" {
		s.corsHeaders(rq)
	}
	if !op.selfAuthorized {
		if err := s.authorize(rq, op.name, op.action, bucket, key); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	if expect {
		h.Del("Connection")
		inviteBody(hw, r, body)
	}
	s.writeIfError(rq, op.fn(s, rq))
}

func expectsContinue(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Expect"), "100-continue")
}

// inviteBody answers "100 Continue" once the request is authenticated and
// authorised (never before: a refused client must not be invited to send
// its body), also for an empty body (net/http sends none then): botocore
// reads a final answer where it waits for the interim one as the end of
// the exchange and leaves bytes on the connection that break the next
// request on it, which then hangs until the client's read timeout.
// Sending it here rather than on the handler's first read also keeps
// botocore's one-second wait from running out while the gateway does slow
// work.
func inviteBody(w http.ResponseWriter, r *http.Request, body io.Reader) {
	if r.ContentLength == 0 {
		w.WriteHeader(http.StatusContinue)
	} else {
		body.Read(nil) // net/http sends 100 Continue on the first read
	}
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
	wrote  bool
	status int // the first status written (0: none yet; 200 once a body went)
}

func (t *trackingWriter) WriteHeader(code int) {
	if t.status == 0 {
		t.status = code
	}
	t.wrote = true
	t.ResponseWriter.WriteHeader(code)
}

func (t *trackingWriter) Write(p []byte) (int, error) {
	if t.status == 0 {
		t.status = http.StatusOK
	}
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
		if m == http.MethodGet && q.Get("x-id") == "ListDirectoryBuckets" {
			return nil, errNotImplemented // directory buckets (S3 Express) do not exist here
		}
		if m == http.MethodGet {
			return &operation{name: "ListBuckets", action: "", fn: (*Server).listBuckets}, nil
		}
		return nil, errMethodNotAllowed
	case rq.key == "":
		return routeBucket(rq, m, q)
	}
	return routeObject(rq, m, q)
}

func routeBucket(rq *request, m string, q url.Values) (*operation, error) {
	if op := routeAbsent(m, q); op != nil {
		return op, nil // configurations Kelp does not have (bucket_absent.go)
	}
	switch m {
	case http.MethodGet:
		switch {
		case has(q, "location"):
			return &operation{name: "GetBucketLocation", action: ActionList, fn: (*Server).getBucketLocation}, nil
		case has(q, "versioning"):
			return &operation{name: "GetBucketVersioning", action: ActionList, fn: (*Server).getBucketVersioning}, nil
		case has(q, "tagging"):
			return &operation{name: "GetBucketTagging", action: ActionTagging, fn: (*Server).getBucketTagging}, nil
		case has(q, "cors"):
			return &operation{name: "GetBucketCors", action: ActionList, fn: (*Server).getBucketCORS}, nil
		case has(q, "acl"):
			return &operation{name: "GetBucketAcl", action: ActionList, fn: (*Server).getBucketACL}, nil
		case has(q, "uploads"):
			return &operation{name: "ListMultipartUploads", action: ActionList, fn: (*Server).listUploads}, nil
		case has(q, "versions"):
			return &operation{name: "ListObjectVersions", action: ActionList, fn: (*Server).listObjectVersions}, nil
		case has(q, "policy"):
			return &operation{name: "GetBucketPolicy", action: ActionAdmin, fn: (*Server).getBucketPolicy}, nil
		case has(q, "lifecycle"):
			return &operation{name: "GetBucketLifecycle", action: ActionList, fn: (*Server).getBucketLifecycle}, nil
		case has(q, "encryption"):
			return &operation{name: "GetBucketEncryption", action: ActionList, fn: (*Server).getBucketEncryption}, nil
		case has(q, "object-lock"):
			return &operation{name: "GetObjectLockConfiguration", action: ActionList, fn: (*Server).getObjectLockConfiguration}, nil
		case has(q, "website"):
			return &operation{name: "GetBucketWebsite", action: ActionList, fn: fail(errNoSuchWebsite)}, nil
		case has(q, "ownershipControls"):
			return &operation{name: "GetBucketOwnershipControls", action: ActionList, fn: (*Server).getOwnershipControls}, nil
		case has(q, "publicAccessBlock"):
			return &operation{name: "GetPublicAccessBlock", action: ActionList, fn: (*Server).getPublicAccessBlock}, nil
		case has(q, "policyStatus"):
			return &operation{name: "GetBucketPolicyStatus", action: ActionList, fn: (*Server).getPolicyStatus}, nil
		case has(q, "session"), has(q, "metadataTable"), has(q, "metadataConfiguration"), has(q, "abac"):
			return &operation{name: "GetBucketConfiguration", action: ActionList, fn: fail(errNotImplemented)}, nil
		case q.Get("list-type") == "2":
			return &operation{name: "ListObjectsV2", action: ActionList, fn: (*Server).listObjectsV2}, nil
		}
		return &operation{name: "ListObjects", action: ActionList, fn: (*Server).listObjectsV1}, nil
	case http.MethodHead:
		return &operation{name: "HeadBucket", action: ActionList, fn: (*Server).headBucket}, nil
	case http.MethodPut:
		switch {
		case has(q, "versioning"):
			return &operation{name: "PutBucketVersioning", action: ActionAdmin, fn: (*Server).putBucketVersioning}, nil
		case has(q, "tagging"):
			return &operation{name: "PutBucketTagging", action: ActionTagging, fn: (*Server).putBucketTagging}, nil
		case has(q, "cors"):
			return &operation{name: "PutBucketCors", action: ActionAdmin, fn: (*Server).putBucketCORS}, nil
		case has(q, "acl"):
			return &operation{name: "PutBucketAcl", action: ActionAdmin, fn: (*Server).putBucketACL}, nil
		case has(q, "policy"):
			return &operation{name: "PutBucketPolicy", action: ActionAdmin, fn: (*Server).putBucketPolicy}, nil
		case has(q, "lifecycle"):
			return &operation{name: "PutBucketLifecycle", action: ActionAdmin, fn: (*Server).putBucketLifecycle}, nil
		case has(q, "ownershipControls"):
			return &operation{name: "PutBucketOwnershipControls", action: ActionAdmin, fn: (*Server).putOwnershipControls}, nil
		case has(q, "publicAccessBlock"):
			return &operation{name: "PutPublicAccessBlock", action: ActionAdmin, fn: (*Server).putPublicAccessBlock}, nil
		case has(q, "object-lock"):
			return &operation{name: "PutObjectLockConfiguration", action: ActionAdmin, fn: (*Server).putObjectLockConfiguration}, nil
		case has(q, "encryption"):
			return &operation{name: "PutBucketEncryption", action: ActionAdmin, fn: (*Server).putBucketEncryption}, nil
		case len(q) > 0 && !onlyIgnorable(q):
			return &operation{name: "PutBucketConfiguration", action: ActionAdmin, fn: fail(errNotImplemented)}, nil
		}
		return &operation{name: "CreateBucket", action: ActionWrite, fn: (*Server).createBucket}, nil
	case http.MethodDelete:
		switch {
		case has(q, "tagging"):
			return &operation{name: "DeleteBucketTagging", action: ActionTagging, fn: (*Server).deleteBucketTagging}, nil
		case has(q, "cors"):
			return &operation{name: "DeleteBucketCors", action: ActionAdmin, fn: (*Server).deleteBucketCORS}, nil
		case has(q, "policy"):
			return &operation{name: "DeleteBucketPolicy", action: ActionAdmin, fn: (*Server).deleteBucketPolicy}, nil
		case has(q, "lifecycle"):
			return &operation{name: "DeleteBucketLifecycle", action: ActionAdmin, fn: (*Server).deleteBucketLifecycle}, nil
		case has(q, "ownershipControls"):
			return &operation{name: "DeleteBucketOwnershipControls", action: ActionAdmin, fn: (*Server).deleteOwnershipControls}, nil
		case has(q, "publicAccessBlock"):
			return &operation{name: "DeletePublicAccessBlock", action: ActionAdmin, fn: (*Server).deletePublicAccessBlock}, nil
		case has(q, "encryption"):
			return &operation{name: "DeleteBucketEncryption", action: ActionAdmin, fn: (*Server).deleteBucketEncryption}, nil
		case len(q) > 0 && !onlyIgnorable(q):
			return &operation{name: "DeleteBucketConfiguration", action: ActionAdmin, fn: fail(errNotImplemented)}, nil
		}
		return &operation{name: "DeleteBucket", action: ActionAdmin, fn: (*Server).deleteBucket}, nil
	case http.MethodPost:
		if has(q, "delete") {
			return &operation{name: "DeleteObjects", action: ActionWrite, fn: (*Server).deleteObjects}, nil
		}
		if isForm(rq.r) {
			return &operation{name: "PostObject", action: ActionWrite, fn: (*Server).postObject, selfAuthorized: true}, nil
		}
		return nil, errMalformedPOST
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
			return &operation{name: "ListParts", action: ActionWrite, fn: (*Server).listParts}, nil
		case has(q, "tagging"):
			return &operation{name: "GetObjectTagging", action: ActionTagging, fn: (*Server).getObjectTagging}, nil
		case has(q, "acl"):
			return &operation{name: "GetObjectAcl", action: ActionRead, fn: (*Server).getObjectACL}, nil
		case has(q, "attributes"):
			return &operation{name: "GetObjectAttributes", action: ActionRead, fn: (*Server).getObjectAttributes}, nil
		case has(q, "retention"):
			return &operation{name: "GetObjectRetention", action: ActionRead, fn: (*Server).getObjectRetention}, nil
		case has(q, "legal-hold"):
			return &operation{name: "GetObjectLegalHold", action: ActionRead, fn: (*Server).getObjectLegalHold}, nil
		case has(q, "torrent"):
			return &operation{name: "GetObjectConfiguration", action: ActionRead, fn: fail(errNotImplemented)}, nil
		}
		return &operation{name: "GetObject", action: ActionRead, fn: (*Server).getObject}, nil
	case http.MethodHead:
		return &operation{name: "HeadObject", action: ActionRead, fn: (*Server).headObject}, nil
	case http.MethodPut:
		switch {
		case has(q, "uploadId") && has(q, "partNumber"):
			if rq.r.Header.Get("x-amz-copy-source") != "" {
				return &operation{name: "UploadPartCopy", action: ActionWrite, fn: (*Server).uploadPartCopy}, nil
			}
			return &operation{name: "UploadPart", action: ActionWrite, fn: (*Server).uploadPart}, nil
		case has(q, "tagging"):
			return &operation{name: "PutObjectTagging", action: ActionTagging, fn: (*Server).putObjectTagging}, nil
		case has(q, "acl"):
			return &operation{name: "PutObjectAcl", action: ActionWrite, fn: (*Server).putObjectACL}, nil
		case has(q, "retention"):
			return &operation{name: "PutObjectRetention", action: ActionWrite, fn: (*Server).putObjectRetention}, nil
		case has(q, "legal-hold"):
			return &operation{name: "PutObjectLegalHold", action: ActionWrite, fn: (*Server).putObjectLegalHold}, nil
		case len(q) > 0 && !onlyIgnorable(q):
			// A sub-resource Kelp does not serve (renameObject, ...): never
			// an upload of the body to the key.
			return &operation{name: "PutObjectConfiguration", action: ActionWrite, fn: fail(errNotImplemented)}, nil
		case rq.r.Header.Get("x-amz-copy-source") != "":
			return &operation{name: "CopyObject", action: ActionWrite, fn: (*Server).copyObject}, nil
		}
		return &operation{name: "PutObject", action: ActionWrite, fn: (*Server).putObject}, nil
	case http.MethodPost:
		switch {
		case has(q, "uploads"):
			return &operation{name: "CreateMultipartUpload", action: ActionWrite, fn: (*Server).createUpload}, nil
		case has(q, "uploadId"):
			return &operation{name: "CompleteMultipartUpload", action: ActionWrite, fn: (*Server).completeUpload}, nil
		}
		return nil, errNotImplemented
	case http.MethodDelete:
		switch {
		case has(q, "uploadId"):
			return &operation{name: "AbortMultipartUpload", action: ActionWrite, fn: (*Server).abortUpload}, nil
		case has(q, "tagging"):
			return &operation{name: "DeleteObjectTagging", action: ActionTagging, fn: (*Server).deleteObjectTagging}, nil
		}
		return &operation{name: "DeleteObject", action: ActionWrite, fn: (*Server).deleteObject}, nil
	}
	return nil, errMethodNotAllowed
}

func fail(err error) func(*Server, *request) error {
	return func(*Server, *request) error { return err }
}

// audit logs one mutating request once it is answered.
func (s *Server) audit(w *trackingWriter, rq *request) {
	who := "anonymous"
	if rq.id != nil {
		who = rq.id.Name
	}
	target := "/" + rq.bucket
	if rq.key != "" {
		target += "/" + rq.key
	}
	status := w.status
	if status == 0 {
		status = http.StatusOK
	}
	s.cfg.Audit.Log(auth.Event{Service: "s3", Who: who, Remote: auth.RemoteHost(rq.r.RemoteAddr), Action: rq.r.Method, Target: target, Status: status})
}
