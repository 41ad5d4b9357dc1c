package sigv4

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Signature Version 2 is verified only because some clients still use it
// by default: botocore (boto3, aws CLI v1) presigns URLs with it unless the
// user sets signature_version=s3v4. It is HMAC-SHA1 over
//
//	Method \n Content-MD5 \n Content-Type \n Date-or-Expires \n
//	CanonicalizedAmzHeaders CanonicalizedResource
//
// and covers no payload: the body is passed through (PayloadUnsigned).

// v2SubResources are the query parameters that are part of the V2
// canonical resource; every other parameter is unsigned in V2.
var v2SubResources = map[string]bool{
	"accelerate": true, "acl": true, "analytics": true, "cors": true, "delete": true,
	"encryption": true, "intelligent-tiering": true, "inventory": true, "legal-hold": true,
	"lifecycle": true, "location": true, "logging": true, "metrics": true, "notification": true,
	"object-lock": true, "ownershipControls": true, "partNumber": true, "policy": true,
	"policyStatus": true, "publicAccessBlock": true, "replication": true, "requestPayment": true,
	"restore": true, "retention": true, "select": true, "select-type": true, "tagging": true,
	"torrent": true, "uploadId": true, "uploads": true, "versionId": true, "versioning": true,
	"versions": true, "website": true,
	"response-cache-control": true, "response-content-disposition": true, "response-content-encoding": true,
	"response-content-language": true, "response-content-type": true, "response-expires": true,
}

// verifyV2Header checks "Authorization: AWS <access key>:<base64 signature>".
func (v *Verifier) verifyV2Header(r *http.Request, authz string) (*Result, error) {
	cred := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(authz), "AWS "))
	i := strings.LastIndexByte(cred, ':')
	if i <= 0 || i == len(cred)-1 {
		return nil, ErrAuthorizationHeaderMalformed.with("Signature Version 2 authorization must be AWS <access key>:<signature>")
	}
	ak, sig := cred[:i], cred[i+1:]
	var t time.Time
	var err error
	dateLine := ""
	if s := r.Header.Get("X-Amz-Date"); s != "" {
		t, err = parseHTTPDate(s)
	} else if s := r.Header.Get("Date"); s != "" {
		t, err = parseHTTPDate(s)
		dateLine = s
	} else {
		return nil, ErrMissingDate
	}
	if err != nil {
		return nil, ErrMissingDate.with("the request date is not an HTTP date")
	}
	now := v.now()
	if d := now.Sub(t); d > v.maxSkew() || -d > v.maxSkew() {
		return nil, ErrRequestTimeTooSkewed
	}
	res := &Result{AccessKey: ak, Time: t.UTC(), SignatureV2: true, SessionToken: r.Header.Get("X-Amz-Security-Token")}
	return v.finishV2(r, res, dateLine, sig)
}

// verifyV2Query checks AWSAccessKeyId, Signature and Expires parameters.
func (v *Verifier) verifyV2Query(r *http.Request, q url.Values) (*Result, error) {
	bad := ErrAuthorizationQueryParametersError
	for _, k := range []string{"AWSAccessKeyId", "Signature", "Expires"} {
		if len(q[k]) != 1 || q.Get(k) == "" {
			return nil, bad.with("Query-string authentication requires the AWSAccessKeyId, Signature and Expires parameters (exactly once each).")
		}
	}
	expStr := q.Get("Expires")
	exp, err := strconv.ParseInt(expStr, 10, 64)
	if err != nil || exp < 0 {
		return nil, bad.with("Expires must be a number of seconds since the epoch")
	}
	expires := time.Unix(exp, 0).UTC()
	if v.now().After(expires) {
		return nil, ErrExpired.with("Request has expired (Expires %s)", expires.Format(time.RFC3339))
	}
	res := &Result{AccessKey: q.Get("AWSAccessKeyId"), Presigned: true, SignatureV2: true, Expires: expires,
		SessionToken: q.Get("x-amz-security-token")}
	return v.finishV2(r, res, expStr, q.Get("Signature"))
}

func (v *Verifier) finishV2(r *http.Request, res *Result, dateLine, sig string) (*Result, error) {
	if err := checkAmzHeadersV2(r); err != nil {
		return nil, err
	}
	secret, ok := v.Creds.SecretKey(res.AccessKey)
	if !ok {
		return nil, ErrInvalidAccessKeyID
	}
	want, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return nil, ErrSignatureDoesNotMatch
	}
	prefix := ""
	if v.VirtualHostBucket != nil {
		if b, ok := v.VirtualHostBucket(r.Host); ok {
			prefix = "/" + b
		}
	}
	sts := r.Method + "\n" + r.Header.Get("Content-Md5") + "\n" + r.Header.Get("Content-Type") + "\n" +
		dateLine + "\n" + canonicalAmzHeadersV2(r) + prefix + canonicalResourceV2(r)
	m := hmac.New(sha1.New, []byte(secret))
	m.Write([]byte(sts))
	if !hmac.Equal(m.Sum(nil), want) {
		return nil, ErrSignatureDoesNotMatch
	}
	res.PayloadMode = PayloadUnsigned
	res.DecodedContentLength = -1
	return res, nil
}

// checkAmzHeadersV2: V2 signs every x-amz-* header, so none can be
// unsigned; only x-amz-content-sha256 streaming values, which V2 cannot
// authenticate, are refused.
func checkAmzHeadersV2(r *http.Request) error {
	if p := r.Header.Get("X-Amz-Content-Sha256"); strings.HasPrefix(p, "STREAMING-") {
		return ErrUnsupportedAuth.with("aws-chunked uploads require Signature Version 4")
	}
	return nil
}

// canonicalAmzHeadersV2 is every x-amz-* header, lower-case, sorted, values
// joined with ',' and white space collapsed, one "name:value\n" each.
func canonicalAmzHeadersV2(r *http.Request) string {
	var names []string
	for name := range r.Header {
		if l := strings.ToLower(name); strings.HasPrefix(l, "x-amz-") {
			names = append(names, l)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		b.WriteString(n + ":" + headerValue(r, n) + "\n")
	}
	return b.String()
}

// canonicalResourceV2 is the path as sent (not re-encoded) plus the
// sub-resource parameters, sorted, with decoded values.
func canonicalResourceV2(r *http.Request) string {
	path := r.URL.EscapedPath()
	if strings.HasPrefix(r.RequestURI, "/") {
		path, _, _ = strings.Cut(r.RequestURI, "?")
	}
	if path == "" {
		path = "/"
	}
	var subs []queryPair
	var hasValue []bool
	for _, part := range strings.Split(r.URL.RawQuery, "&") {
		k, val, eq := strings.Cut(part, "=")
		if !v2SubResources[k] {
			continue
		}
		if dv, err := url.PathUnescape(val); err == nil {
			val = dv
		}
		subs = append(subs, queryPair{k, val})
		hasValue = append(hasValue, eq)
	}
	if len(subs) == 0 {
		return path
	}
	idx := make([]int, len(subs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return subs[idx[a]].k < subs[idx[b]].k })
	var b strings.Builder
	b.WriteString(path)
	for n, i := range idx {
		if n == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		b.WriteString(subs[i].k)
		if hasValue[i] {
			b.WriteByte('=')
			b.WriteString(subs[i].v)
		}
	}
	return b.String()
}

// parseHTTPDate accepts the HTTP date formats plus RFC 1123 with a numeric
// zone, which older V2 signers (and the AWS examples) use.
func parseHTTPDate(s string) (time.Time, error) {
	t, err := http.ParseTime(s)
	if err == nil {
		return t, nil
	}
	for _, layout := range []string{time.RFC1123Z, time.RFC1123} {
		if t, err2 := time.Parse(layout, s); err2 == nil {
			return t, nil
		}
	}
	return time.Time{}, err
}
