package s3

import (
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/kelpfs/kelp/internal/objectapi"
)

// Browser-based uploads: POST /bucket with an HTML form (multipart/form-data)
// whose fields come first and whose last part, "file", is the object. The
// fields carry the key, the object's headers, and for authenticated uploads a
// policy document signed by the uploader's key (see sigv4.VerifyPostPolicy):
// an expiry and conditions that every field must meet, so that a web page can
// let anyone upload only what its owner allowed.

// maxFormFields bounds the fields before the file part, which are held in
// memory.
const maxFormFields = 1 << 20

var (
	errMalformedPOST = newErr("MalformedPOSTRequest", http.StatusBadRequest,
		"The body of your POST request is not well-formed multipart/form-data.")
	errPOSTNoFile = newErr("InvalidArgument", http.StatusBadRequest,
		"POST requires exactly one file upload per request.")
	errPOSTNoKey = newErr("InvalidArgument", http.StatusBadRequest,
		"Bucket POST must contain a field named 'key'.  If it is specified, please check the order of the fields.")
)

func policyFailed(format string, args ...any) error {
	return &apiError{Code: "AccessDenied", Status: http.StatusForbidden,
		Message: "Invalid according to Policy: " + fmt.Sprintf(format, args...)}
}

func invalidPolicy(format string, args ...any) error {
	return &apiError{Code: "InvalidPolicyDocument", Status: http.StatusBadRequest,
		Message: "Invalid Policy: " + fmt.Sprintf(format, args...)}
}

// isForm reports whether a bucket POST is a form upload.
func isForm(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "multipart/form-data"
}

// postForm is a parsed form: its fields by lower-case name, and the file.
type postForm struct {
	fields   map[string]string
	names    []string // the fields' names as sent, in order
	file     *multipart.Part
	filename string
}

func (f *postForm) get(name string) string { return f.fields[name] }

// readForm reads the fields up to the file part, which it leaves unread.
func readForm(r *http.Request) (*postForm, error) {
	_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || params["boundary"] == "" {
		return nil, errMalformedPOST
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	f := &postForm{fields: map[string]string{}}
	budget := int64(maxFormFields)
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return nil, errPOSTNoFile
		}
		if err != nil {
			return nil, errMalformedPOST
		}
		name := strings.ToLower(p.FormName())
		if name == "file" {
			f.file, f.filename = p, path.Base(strings.ReplaceAll(p.FileName(), `\`, "/"))
			if f.filename == "." || f.filename == "/" {
				f.filename = ""
			}
			return f, nil
		}
		v, err := io.ReadAll(io.LimitReader(p, budget+1))
		if err != nil {
			return nil, errMalformedPOST
		}
		if budget -= int64(len(v)); budget < 0 {
			return nil, newErr("MaxPostPreDataLengthExceeded", http.StatusBadRequest,
				"Your POST request fields preceding the upload file were too large.")
		}
		if _, dup := f.fields[name]; !dup {
			f.names = append(f.names, p.FormName())
		}
		f.fields[name] = string(v)
	}
}

func (s *Server) postObject(rq *request) error {
	form, err := readForm(rq.r)
	if err != nil {
		return err
	}
	res, err := s.verifier.VerifyPostPolicy(form.get)
	if err != nil {
		return err
	}
	rq.auth, rq.id = res, nil
	if !res.Anonymous {
		if rq.id = s.lookup(res.AccessKey); rq.id == nil {
			return errAccessDenied
		}
	}
	key := form.get("key")
	if key == "" {
		return errPOSTNoKey
	}
	key = strings.ReplaceAll(key, "${filename}", form.filename)
	rq.key = key
	limits := sizeRange{min: 0, max: -1}
	if p := form.get("policy"); p != "" {
		if limits, err = checkPostPolicy(p, form, rq.bucket, key, s.verifier.Now); err != nil {
			return err
		}
	}
	if err := s.authorize(rq, "PutObject", ActionWrite, rq.bucket, key); err != nil {
		return err
	}
	h := http.Header{}
	for name, v := range form.fields {
		h.Set(textproto.CanonicalMIMEHeaderKey(name), v)
	}
	if acl := form.get("acl"); acl != "" {
		h.Set("X-Amz-Acl", acl) // the form's name for the header
	}
	h.Del("Content-Md5") // a form field, not a digest of the body S3 checks
	md, err := metadata(&http.Request{Header: h})
	if err != nil {
		return err
	}
	if err := s.objectAccess(rq, h, &md); err != nil {
		return err
	}
	if md.Encryption, err = s.encryptionFor(rq, rq.bucket, key, h); err != nil {
		return err
	}
	body := &rangeReader{r: form.file, limits: limits}
	oi, err := s.layer.PutObject(rq.ctx, rq.bucket, key, body, objectapi.PutOptions{Metadata: md, Size: -1})
	if body.err != nil {
		return body.err
	}
	if err != nil {
		return err
	}
	return s.postAnswer(rq, form, key, oi)
}

// postAnswer answers a stored form upload as the form asked:
// success_action_redirect, or success_action_status 200, 201 (an XML
// document) or 204 (the default).
func (s *Server) postAnswer(rq *request, form *postForm, key string, oi objectapi.ObjectInfo) error {
	h := rq.w.Header()
	h.Set("ETag", quote(oi.ETag))
	setVersionID(h, oi.VersionID)
	location := "/" + rq.bucket + "/" + url.PathEscape(key)
	h.Set("Location", location)
	redirect := form.get("success_action_redirect")
	if redirect == "" {
		redirect = form.get("redirect")
	}
	if u, err := url.Parse(redirect); redirect != "" && err == nil && u.Scheme != "" {
		q := u.Query()
		q.Set("bucket", rq.bucket)
		q.Set("key", key)
		q.Set("etag", quote(oi.ETag))
		u.RawQuery = q.Encode()
		h.Set("Location", u.String())
		rq.w.WriteHeader(http.StatusSeeOther)
		return nil
	}
	switch form.get("success_action_status") {
	case "200":
		rq.w.WriteHeader(http.StatusOK)
	case "201":
		writeXML(rq.w, http.StatusCreated, struct {
			XMLName  xml.Name `xml:"PostResponse"`
			Location string
			Bucket   string
			Key      string
			ETag     string
		}{Location: location, Bucket: rq.bucket, Key: key, ETag: quote(oi.ETag)})
	default:
		rq.w.WriteHeader(http.StatusNoContent)
	}
	return nil
}

// sizeRange is a policy's content-length-range; max < 0 means no limit.
type sizeRange struct{ min, max int64 }

// rangeReader fails an upload whose size leaves the policy's range: at the
// first byte past max, or at the end when short of min. err records why, so
// that the upload's error is reported, not the store's view of it.
type rangeReader struct {
	r      io.Reader
	limits sizeRange
	n      int64
	err    error
}

func (rr *rangeReader) Read(p []byte) (int, error) {
	if rr.err != nil {
		return 0, rr.err
	}
	n, err := rr.r.Read(p)
	rr.n += int64(n)
	switch {
	case rr.limits.max >= 0 && rr.n > rr.limits.max:
		rr.err = newErr("EntityTooLarge", http.StatusBadRequest, "Your proposed upload exceeds the maximum allowed size")
		return 0, rr.err
	case errors.Is(err, io.EOF) && rr.n < rr.limits.min:
		rr.err = newErr("EntityTooSmall", http.StatusBadRequest, "Your proposed upload is smaller than the minimum allowed size")
		return 0, rr.err
	case err != nil && !errors.Is(err, io.EOF):
		rr.err = errMalformedPOST
		return 0, rr.err
	}
	return n, err
}

// checkPostPolicy decodes a base64 policy and checks it against the form:
// not expired, every condition met, every field (but the signature, the
// policy itself and x-ignore-* ones) covered by a condition. It returns the
// allowed object size.
func checkPostPolicy(b64 string, form *postForm, bucket, key string, now func() time.Time) (sizeRange, error) {
	limits := sizeRange{min: 0, max: -1}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return limits, invalidPolicy("Policy is not valid base64.")
	}
	var doc struct {
		Expiration string            `json:"expiration"`
		Conditions []json.RawMessage `json:"conditions"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return limits, invalidPolicy("Policy is not valid JSON: %v", err)
	}
	if doc.Expiration == "" {
		return limits, invalidPolicy("Policy missing expiration.")
	}
	exp, err := time.Parse(time.RFC3339, doc.Expiration)
	if err != nil {
		return limits, invalidPolicy("Invalid 'expiration' value: %q", doc.Expiration)
	}
	if now == nil {
		now = time.Now
	}
	if !now().Before(exp) {
		return limits, policyFailed("Policy expired.")
	}
	if doc.Conditions == nil {
		return limits, invalidPolicy("Policy missing conditions.")
	}
	value := func(name string) (string, bool) {
		switch name {
		case "bucket":
			return bucket, true
		case "key":
			return key, true
		}
		v, ok := form.fields[name]
		return v, ok
	}
	covered := map[string]bool{}
	for _, c := range doc.Conditions {
		name, err := checkCondition(c, value, &limits)
		if err != nil {
			return limits, err
		}
		covered[name] = true
	}
	for _, n := range form.names {
		name := strings.ToLower(n)
		switch {
		case covered[name], name == "policy", name == "x-amz-signature", name == "signature",
			name == "awsaccesskeyid", strings.HasPrefix(name, "x-ignore-"):
			continue
		}
		return limits, policyFailed("Extra input fields: %s", n)
	}
	return limits, nil
}

// checkCondition checks one condition and returns the field it covers.
func checkCondition(raw json.RawMessage, value func(string) (string, bool), limits *sizeRange) (string, error) {
	var exact map[string]string
	if err := json.Unmarshal(raw, &exact); err == nil {
		if len(exact) != 1 {
			return "", invalidPolicy("a condition object must name one field: %s", raw)
		}
		for name, want := range exact {
			name = strings.ToLower(strings.TrimPrefix(name, "$"))
			if got, _ := value(name); got != want {
				return "", policyFailed("Policy Condition failed: [\"eq\", \"$%s\", %q]", name, want)
			}
			return name, nil
		}
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil || len(list) != 3 {
		return "", invalidPolicy("a condition must be an object or a list of three: %s", raw)
	}
	var op string
	if err := json.Unmarshal(list[0], &op); err != nil {
		return "", invalidPolicy("a condition's operator must be a string: %s", raw)
	}
	switch op = strings.ToLower(op); op {
	case "content-length-range":
		lo, err1 := jsonInt(list[1])
		hi, err2 := jsonInt(list[2])
		if err1 != nil || err2 != nil || lo < 0 || hi < lo {
			return "", invalidPolicy("Invalid content-length-range: %s", raw)
		}
		limits.min, limits.max = lo, hi
		return "", nil
	case "eq", "starts-with":
	default:
		return "", invalidPolicy("Invalid condition operator %q", op)
	}
	var field, want string
	if json.Unmarshal(list[1], &field) != nil || json.Unmarshal(list[2], &want) != nil || !strings.HasPrefix(field, "$") {
		return "", invalidPolicy("Invalid condition: %s", raw)
	}
	name := strings.ToLower(field[1:])
	got, _ := value(name)
	ok := got == want
	if op == "starts-with" {
		ok = strings.HasPrefix(got, want)
		if name == "content-type" {
			// A Content-Type may list several types; each must match.
			ok = true
			for _, t := range strings.Split(got, ",") {
				ok = ok && strings.HasPrefix(strings.TrimSpace(t), want)
			}
		}
	}
	if !ok {
		return "", policyFailed("Policy Condition failed: [%q, %q, %q]", op, field, want)
	}
	return name, nil
}

// jsonInt reads a JSON number or a string holding one.
func jsonInt(raw json.RawMessage) (int64, error) {
	var n json.Number
	if err := json.Unmarshal(raw, &n); err == nil {
		return n.Int64()
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, err
	}
	return strconv.ParseInt(s, 10, 64)
}
