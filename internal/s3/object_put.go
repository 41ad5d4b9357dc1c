package s3

import (
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/kelpfs/kelp/internal/objectapi"
	"github.com/kelpfs/kelp/internal/s3/sigv4"
)

// maxUserMeta is S3's limit on the size of user metadata.
const maxUserMeta = 2 << 10

// metadata reads the object metadata of a PUT, copy or multipart create.
func metadata(r *http.Request) (objectapi.Metadata, error) {
	md := objectapi.Metadata{ContentType: r.Header.Get("Content-Type"), Headers: map[string]string{}}
	if sc := r.Header.Get("x-amz-storage-class"); sc != "" && sc != "STANDARD" {
		// Kelp has one storage class: another is refused, never ignored.
		return md, &apiError{Code: "InvalidStorageClass", Status: http.StatusBadRequest,
			Message: fmt.Sprintf("The storage class you specified is not valid: Kelp stores every object as STANDARD, not %q.", sc)}
	}
	for _, k := range objectapi.SystemHeaders() {
		v := r.Header.Get(k)
		if k == "content-encoding" {
			v = sigv4.ContentEncoding(r.Header)
		}
		if v != "" {
			md.Headers[k] = v
		}
	}
	size := 0
	for k, vs := range r.Header {
		name, ok := strings.CutPrefix(strings.ToLower(k), "x-amz-meta-")
		if !ok || name == "" {
			continue
		}
		if md.UserMeta == nil {
			md.UserMeta = map[string]string{}
		}
		v := strings.Join(vs, ",")
		md.UserMeta[name] = v
		size += len(name) + len(v)
	}
	if size > maxUserMeta {
		return md, &apiError{Code: "MetadataTooLarge", Status: 400, Message: "Your metadata headers exceed the maximum allowed metadata size."}
	}
	if acl := r.Header.Get("x-amz-acl"); acl != "" {
		if !objectapi.ValidACL(acl) {
			return md, &apiError{Code: "InvalidArgument", Status: 400, Message: "Invalid canned ACL " + strconv.Quote(acl)}
		}
		md.ACL = acl
	}
	if _, err := parseSSERequest(r.Header); err != nil { // applied by encryptionFor
		return md, err
	}
	if t := r.Header.Get("x-amz-tagging"); t != "" {
		if _, err := url.ParseQuery(t); err != nil {
			return md, &apiError{Code: "InvalidArgument", Status: 400, Message: "The header 'x-amz-tagging' shall be encoded as UTF-8 then URLEncoded URL query parameters without tag name duplicates."}
		}
		md.Tags = t
	}
	if err := checkHeaderValues(md); err != nil {
		return md, err
	}
	lk, err := objectLockHeaders(r.Header)
	md.Lock = lk
	return md, err
}

// checkHeaderValues refuses metadata that could not be sent back in a
// response header. Request headers cannot carry control characters (the
// HTTP server refuses them), but a form upload's fields can, and Go's
// server writes a header value as it is: every later GET of the object
// would be an answer the client cannot parse.
func checkHeaderValues(md objectapi.Metadata) error {
	bad := func(name, v string) error {
		if validHeaderValue(v) {
			return nil
		}
		return &apiError{Code: "InvalidArgument", Status: http.StatusBadRequest,
			Message: "The value of " + name + " contains control characters."}
	}
	if err := bad("Content-Type", md.ContentType); err != nil {
		return err
	}
	for k, v := range md.Headers {
		if err := bad(k, v); err != nil {
			return err
		}
	}
	for k, v := range md.UserMeta {
		if err := bad("x-amz-meta-"+k, v); err != nil {
			return err
		}
	}
	return nil
}

// validHeaderValue reports whether v can be a header value: no control
// characters other than tab.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// contentMD5 decodes Content-MD5; nil when absent. A header that is
// present but empty is InvalidDigest, as S3: the client meant a digest.
func contentMD5(r *http.Request) ([]byte, error) {
	vs, present := r.Header["Content-Md5"]
	if !present {
		return nil, nil
	}
	v := ""
	if len(vs) > 0 {
		v = vs[0]
	}
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(b) != 16 {
		return nil, errInvalidDigest
	}
	return b, nil
}

// checksumSpec finds the checksum a request asks to verify: a header
// x-amz-checksum-ALG with the value, or a trailer x-amz-checksum-ALG
// (verified by sigv4 too, and read after the body), or just
// x-amz-sdk-checksum-algorithm.
func checksumSpec(rq *request) (objectapi.ChecksumSpec, error) {
	h := rq.r.Header
	var spec objectapi.ChecksumSpec
	for _, alg := range objectapi.ChecksumAlgorithms() {
		name := "x-amz-checksum-" + strings.ToLower(alg)
		if v := h.Get(name); v != "" {
			if spec.Algorithm != "" {
				return spec, &apiError{Code: "InvalidRequest", Status: 400, Message: "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed."}
			}
			if _, err := base64.StdEncoding.DecodeString(v); err != nil {
				return spec, &apiError{Code: "InvalidArgument", Status: 400, Message: "Value for " + name + " header is invalid."}
			}
			spec.Algorithm, spec.Value = alg, v
		}
	}
	if spec.Algorithm != "" {
		return spec, nil
	}
	if t := strings.ToLower(strings.TrimSpace(h.Get("x-amz-trailer"))); strings.HasPrefix(t, "x-amz-checksum-") {
		alg := objectapi.NormalizeChecksumAlgorithm(strings.TrimPrefix(t, "x-amz-checksum-"))
		if alg == "" {
			return spec, &apiError{Code: "InvalidRequest", Status: 400, Message: "The value specified in the x-amz-trailer header is not supported"}
		}
		res := rq.auth
		spec.Algorithm = alg
		spec.Trailer = func() string { return res.Trailer().Get(t) }
		return spec, nil
	}
	if a := h.Get("x-amz-sdk-checksum-algorithm"); a != "" {
		spec.Algorithm = objectapi.NormalizeChecksumAlgorithm(a)
		if spec.Algorithm == "" {
			return spec, &apiError{Code: "InvalidRequest", Status: 400, Message: "Checksum algorithm provided is unsupported."}
		}
	}
	return spec, nil
}

// bodySize is the length of the (decoded) body, -1 when unknown.
func bodySize(rq *request) int64 {
	if rq.auth.PayloadMode.Streaming() {
		return rq.auth.DecodedContentLength
	}
	return rq.r.ContentLength
}

func (s *Server) putObject(rq *request) error {
	md, err := metadata(rq.r)
	if err != nil {
		return err
	}
	if err := s.objectAccess(rq, rq.r.Header, &md); err != nil {
		return err
	}
	if err := checkLockDigest(rq.r, md.Lock); err != nil {
		return err
	}
	sum, err := contentMD5(rq.r)
	if err != nil {
		return err
	}
	cs, err := checksumSpec(rq)
	if err != nil {
		return err
	}
	size := bodySize(rq)
	if size < 0 && len(rq.r.TransferEncoding) == 0 {
		return errMissingLength
	}
	if md.Encryption, err = s.encryptionFor(rq, rq.bucket, rq.key, rq.r.Header); err != nil {
		return err
	}
	oi, err := s.layer.PutObject(rq.ctx, rq.bucket, rq.key, rq.r.Body, objectapi.PutOptions{
		Metadata: md, Size: size, ContentMD5: sum, Checksum: cs,
		IfNoneMatch: rq.r.Header.Get("If-None-Match"), IfMatch: rq.r.Header.Get("If-Match"),
		IfUnmodifiedSince: ifUnmodifiedSince(rq.r.Header),
	})
	if err != nil {
		return err
	}
	h := rq.w.Header()
	h.Set("ETag", quote(oi.ETag))
	setVersionID(h, oi.VersionID)
	sseHeaders(h, oi.SSE, rq.r.Header, true)
	s.setExpiration(rq, h, oi)
	if oi.Checksum.Algorithm != "" {
		h.Set("x-amz-checksum-"+strings.ToLower(oi.Checksum.Algorithm), oi.Checksum.Value)
		h.Set("x-amz-checksum-type", oi.Checksum.Type)
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

// copySource parses x-amz-copy-source: "bucket/key" or "/bucket/key",
// URL-encoded, optionally with "?versionId=ID": bucket, key and version
// id ("" the latest).
func copySource(h http.Header) (string, string, string, error) {
	v := h.Get("x-amz-copy-source")
	p, query, _ := strings.Cut(v, "?")
	bad := &apiError{Code: "InvalidArgument", Status: 400, Message: "Copy Source must mention the source bucket and key: sourcebucket/sourcekey"}
	p, err := url.PathUnescape(p)
	if err != nil {
		return "", "", "", bad
	}
	ver := ""
	if query != "" {
		q, err := url.ParseQuery(query)
		if err != nil {
			return "", "", "", bad
		}
		ver = q.Get("versionId")
	}
	b, k, ok := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	if !ok || b == "" || k == "" {
		return "", "", "", bad
	}
	return b, k, ver, nil
}

// setVersionID sets x-amz-version-id when the object has a version id
// (always in versioned buckets, never in unversioned ones).
func setVersionID(h http.Header, vid string) {
	if vid != "" {
		h.Set("x-amz-version-id", vid)
	}
}

type copyObjectResult struct {
	XMLName      xml.Name `xml:"CopyObjectResult"`
	Xmlns        string   `xml:"xmlns,attr"`
	LastModified string
	ETag         string
	checksumFields
}

// checksumFields are an object's checksum as S3 documents carry it: one
// element named after the algorithm.
type checksumFields struct {
	ChecksumCRC32     string `xml:",omitempty"`
	ChecksumCRC32C    string `xml:",omitempty"`
	ChecksumCRC64NVME string `xml:",omitempty"`
	ChecksumSHA1      string `xml:",omitempty"`
	ChecksumSHA256    string `xml:",omitempty"`
}

func (c *checksumFields) setChecksum(cs objectapi.Checksum) {
	switch cs.Algorithm {
	case objectapi.ChecksumCRC32:
		c.ChecksumCRC32 = cs.Value
	case objectapi.ChecksumCRC32C:
		c.ChecksumCRC32C = cs.Value
	case objectapi.ChecksumCRC64NVME:
		c.ChecksumCRC64NVME = cs.Value
	case objectapi.ChecksumSHA1:
		c.ChecksumSHA1 = cs.Value
	case objectapi.ChecksumSHA256:
		c.ChecksumSHA256 = cs.Value
	}
}

func (s *Server) copyObject(rq *request) error {
	sb, sk, sv, err := copySource(rq.r.Header)
	if err != nil {
		return err
	}
	if err := s.authorize(rq, copySourceOp(sv), ActionRead, sb, sk); err != nil {
		return err
	}
	opts := objectapi.CopyOptions{SourceConditions: conditions(rq.r.Header, "x-amz-copy-source-"), SourceVersionID: sv,
		IfMatch: rq.r.Header.Get("If-Match"), IfNoneMatch: rq.r.Header.Get("If-None-Match"),
		IfUnmodifiedSince: ifUnmodifiedSince(rq.r.Header)}
	switch d := rq.r.Header.Get("x-amz-metadata-directive"); d {
	case "", "COPY":
	case "REPLACE":
		opts.Replace = true
	default:
		return &apiError{Code: "InvalidArgument", Status: 400, Message: "Unknown metadata directive."}
	}
	md, err := metadata(rq.r)
	if err != nil {
		return err
	}
	if err := s.objectAccess(rq, rq.r.Header, &md); err != nil {
		return err
	}
	if md.Encryption, err = s.encryptionFor(rq, rq.bucket, rq.key, rq.r.Header); err != nil {
		return err
	}
	opts.Metadata = md
	opts.Keys = s.readKeys(rq)
	switch d := rq.r.Header.Get("x-amz-tagging-directive"); d {
	case "", "COPY":
	case "REPLACE":
		opts.ReplaceTags = true
	default:
		return &apiError{Code: "InvalidArgument", Status: 400, Message: "Unknown tagging directive."}
	}
	if a := rq.r.Header.Get("x-amz-checksum-algorithm"); a != "" {
		if opts.ChecksumAlgorithm = objectapi.NormalizeChecksumAlgorithm(a); opts.ChecksumAlgorithm == "" {
			return &apiError{Code: "InvalidRequest", Status: 400, Message: "Checksum algorithm provided is unsupported."}
		}
	}
	oi, err := s.layer.CopyObject(rq.ctx, sb, sk, rq.bucket, rq.key, opts)
	if err != nil {
		return err
	}
	if sv != "" {
		rq.w.Header().Set("x-amz-copy-source-version-id", sv)
	}
	setVersionID(rq.w.Header(), oi.VersionID)
	sseHeaders(rq.w.Header(), oi.SSE, rq.r.Header, true)
	s.setExpiration(rq, rq.w.Header(), oi)
	out := copyObjectResult{Xmlns: s3NS, LastModified: isoTime(oi.LastModified), ETag: quote(oi.ETag)}
	out.setChecksum(oi.Checksum)
	writeXML(rq.w, http.StatusOK, out)
	return nil
}
