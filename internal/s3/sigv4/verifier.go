package sigv4

import (
	"net/http"
	"strings"
	"time"
)

// Credentials looks up the secret key of an access key. It is called once
// per authenticated request and must be safe for concurrent use. ok is
// false when the access key is unknown (or disabled).
type Credentials interface {
	SecretKey(accessKey string) (secret string, ok bool)
}

// StaticCredentials is a fixed access key -> secret key map, for tests and
// single-user setups. It must not be modified while in use.
type StaticCredentials map[string]string

// SecretKey implements Credentials.
func (c StaticCredentials) SecretKey(accessKey string) (string, bool) {
	s, ok := c[accessKey]
	return s, ok
}

// DefaultMaxSkew is the clock skew S3 tolerates between client and server.
const DefaultMaxSkew = 15 * time.Minute

// maxPresignExpiry is the longest X-Amz-Expires S3 accepts: one week.
const maxPresignExpiry = 7 * 24 * time.Hour

// Verifier checks SigV4 signatures of S3 requests. Its fields are read-only
// once it is in use; Verify is safe for concurrent use.
type Verifier struct {
	// Creds resolves access keys. Required.
	Creds Credentials
	// Region, when set, is the only region a credential scope may name;
	// a request signed for another region fails with
	// AuthorizationHeaderMalformed, as S3 does. Empty accepts whatever
	// region the client signed with: a self-hosted store has no regions,
	// and clients default to different ones (us-east-1, or whatever the
	// user's AWS profile says).
	Region string
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// MaxSkew is the largest accepted difference between the request time
	// and Now; zero means DefaultMaxSkew.
	MaxSkew time.Duration
	// DisableV2 refuses Signature Version 2 (header and query forms) with
	// ErrUnsupportedAuth. V2 is accepted by default because botocore (boto3,
	// aws CLI v1) still presigns URLs with it unless told otherwise.
	DisableV2 bool
	// VirtualHostBucket, if set, returns the bucket a virtual-hosted-style
	// Host names (ok false for path-style hosts). Only Signature Version 2
	// needs it, because its canonical resource starts with "/bucket"; V2
	// requests to virtual-hosted buckets fail without it.
	VirtualHostBucket func(host string) (bucket string, ok bool)
}

// PayloadMode says how the request body is protected.
type PayloadMode int

// Payload modes, named after the x-amz-content-sha256 values.
const (
	// PayloadNone: anonymous request; the body is untouched.
	PayloadNone PayloadMode = iota
	// PayloadSigned: x-amz-content-sha256 is the hex SHA-256 of the body;
	// the body's Read returns ErrContentSHA256Mismatch at EOF if it is not.
	PayloadSigned
	// PayloadUnsigned: UNSIGNED-PAYLOAD; the body is untouched.
	PayloadUnsigned
	// PayloadStreamingSigned: STREAMING-AWS4-HMAC-SHA256-PAYLOAD.
	PayloadStreamingSigned
	// PayloadStreamingSignedTrailer: STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER.
	PayloadStreamingSignedTrailer
	// PayloadStreamingUnsignedTrailer: STREAMING-UNSIGNED-PAYLOAD-TRAILER.
	PayloadStreamingUnsignedTrailer
)

var payloadModeNames = [...]string{"none", "signed", "UNSIGNED-PAYLOAD",
	"STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER",
	"STREAMING-UNSIGNED-PAYLOAD-TRAILER"}

func (m PayloadMode) String() string {
	if m < 0 || int(m) >= len(payloadModeNames) {
		return "unknown"
	}
	return payloadModeNames[m]
}

// Streaming reports whether the body is aws-chunked encoded (and decoded by
// the body Verify installs).
func (m PayloadMode) Streaming() bool { return m >= PayloadStreamingSigned }

// Result describes an authenticated (or anonymous) request.
type Result struct {
	// AccessKey is the access key that signed the request; empty when
	// Anonymous.
	AccessKey string
	// Anonymous is set when the request carries no signature at all. The
	// gateway decides whether anonymous access is allowed. PayloadMode is
	// then PayloadNone, or the mode of a declared hex SHA-256 or
	// STREAMING-UNSIGNED-PAYLOAD-TRAILER body, which is still checked or
	// decoded.
	Anonymous bool
	// Presigned is set when the signature came from query parameters.
	Presigned bool
	// SignatureV2 is set when the request was signed with Signature
	// Version 2 (see Verifier.DisableV2); Region is then empty.
	SignatureV2 bool
	// Region is the region of the credential scope.
	Region string
	// Time is the signing time (X-Amz-Date or Date).
	Time time.Time
	// Expires is when a presigned URL stops being valid; zero otherwise.
	Expires time.Time
	// SessionToken is X-Amz-Security-Token, if any. It is covered by the
	// signature but not validated here: a gateway without STS rejects it.
	SessionToken string
	// SignedHeaders lists the signed header names, lower-case, as sent.
	SignedHeaders []string
	// PayloadMode says how the body is protected.
	PayloadMode PayloadMode
	// PayloadSHA256 is the signed hex SHA-256 of the body (PayloadSigned).
	PayloadSHA256 string
	// DecodedContentLength is the object size for streaming modes
	// (x-amz-decoded-content-length), -1 when unknown or not streaming.
	DecodedContentLength int64

	chunks *chunkReader
}

// Trailer returns the trailing headers of a streaming body with trailers,
// keyed in canonical form (X-Amz-Checksum-Crc32 ...), once the body has
// returned io.EOF; nil before that and for other modes. Call it from the
// goroutine that read the body.
func (res *Result) Trailer() http.Header {
	if res.chunks == nil || !res.chunks.done() {
		return nil
	}
	return res.chunks.trailer
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

func (v *Verifier) maxSkew() time.Duration {
	if v.MaxSkew > 0 {
		return v.MaxSkew
	}
	return DefaultMaxSkew
}

// Verify authenticates r. On success it returns the Result and, for the
// payload modes that need it, replaces r.Body with a reader that decodes
// and verifies the body as it is read (see the package documentation);
// for streaming modes it also sets r.ContentLength to the decoded length
// (-1 when unknown). On failure it returns an *Error and leaves r as it was.
// A request without any signature is not an error: the Result has
// Anonymous set.
func (v *Verifier) Verify(r *http.Request) (*Result, error) {
	authz := r.Header.Get("Authorization")
	q := r.URL.Query()
	presignV4 := q.Has("X-Amz-Algorithm") || q.Has("X-Amz-Credential") || q.Has("X-Amz-Signature")
	presignV2 := q.Has("AWSAccessKeyId") && q.Has("Signature")
	switch {
	case authz != "" && (presignV4 || presignV2):
		return nil, ErrMultipleAuth
	case authz != "":
		scheme, _, _ := strings.Cut(strings.TrimSpace(authz), " ")
		if scheme == "AWS" && !v.DisableV2 {
			return v.verifyV2Header(r, authz)
		}
		if scheme != algorithm {
			return nil, ErrUnsupportedAuth.with("The authorization mechanism %q is not supported. Please use %s.", scheme, algorithm)
		}
		a, err := parseAuthorization(authz)
		if err != nil {
			return nil, err
		}
		return v.verifyHeader(r, a)
	case presignV4:
		a, err := parsePresigned(q)
		if err != nil {
			return nil, err
		}
		return v.verifyPresigned(r, a)
	case presignV2 && !v.DisableV2:
		return v.verifyV2Query(r, q)
	case presignV2:
		return nil, ErrUnsupportedAuth.with("Query-string authentication version 2 is not supported. Please use %s.", algorithm)
	}
	return anonymous(r)
}

// anonymous builds the Result of an unsigned request. Its body is still
// decoded when a client declared a framing: SDKs with anonymous
// credentials send aws-chunked bodies with unsigned trailers over TLS, and
// a gateway that stored the framing would corrupt the object.
func anonymous(r *http.Request) (*Result, error) {
	res := &Result{Anonymous: true, PayloadMode: PayloadNone, DecodedContentLength: -1}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		return res, nil
	}
	mode, err := classifyPayload(payload)
	if err != nil {
		return nil, err
	}
	switch mode {
	case PayloadSigned:
		res.PayloadMode, res.PayloadSHA256 = mode, strings.ToLower(payload)
		r.Body = newSHA256Reader(r.Body, res.PayloadSHA256)
	case PayloadStreamingUnsignedTrailer:
		decoded, err := decodedLength(r, mode)
		if err != nil {
			return nil, err
		}
		trailers, err := declaredTrailers(r, mode)
		if err != nil {
			return nil, err
		}
		cr := newChunkReader(r.Body, chunkConfig{trailers: true, declared: decoded, expect: trailers})
		res.PayloadMode, res.DecodedContentLength, res.chunks = mode, decoded, cr
		r.Body, r.ContentLength = cr, decoded
	case PayloadStreamingSigned, PayloadStreamingSignedTrailer:
		return nil, ErrMissingSecurityHeader.with("%s requires an Authorization header", payload)
	}
	return res, nil
}

// auth is what a signature claims, from the header or the query.
type auth struct {
	accessKey, date, region, service string
	signedHeaders                    []string
	signature                        string
	// presigned only
	amzDate      string
	expires      time.Duration
	sessionToken string
	payloadHash  string
}

func (a *auth) scope() string {
	return a.date + "/" + a.region + "/" + a.service + "/" + terminator
}

func (a *auth) signs(name string) bool {
	for _, h := range a.signedHeaders {
		if h == name {
			return true
		}
	}
	return false
}

// checkScope validates the parts of the credential scope that do not depend
// on the request. malformed is the error kind to report.
func (v *Verifier) checkScope(a *auth, malformed *Error) error {
	if a.service != serviceS3 {
		return malformed.with("incorrect service %q. This endpoint belongs to %q.", a.service, serviceS3)
	}
	if v.Region != "" && a.region != v.Region {
		return malformed.with("the region %q is wrong; expecting %q", a.region, v.Region)
	}
	if !a.signs("host") {
		return malformed.with("the host header must be signed")
	}
	return nil
}

func (v *Verifier) verifyHeader(r *http.Request, a *auth) (*Result, error) {
	if err := v.checkScope(a, ErrAuthorizationHeaderMalformed); err != nil {
		return nil, err
	}
	t, amzDate, err := requestTime(r, a)
	if err != nil {
		return nil, err
	}
	// The time first, as S3: a request from far away in time is told so
	// even when its credential scope no longer matches its date.
	now := v.now()
	if d := now.Sub(t); d > v.maxSkew() || -d > v.maxSkew() {
		return nil, ErrRequestTimeTooSkewed.with("The difference between the request time (%s) and the current time (%s) is too large.",
			t.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if t.Format(dateFormat) != a.date {
		return nil, ErrAuthorizationHeaderMalformed.with("Invalid credential date %q. Date is not the same as X-Amz-Date: %q.", a.date, t.Format(dateFormat))
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		return nil, ErrMissingSecurityHeader.with("Missing required header for this request: x-amz-content-sha256")
	}
	mode, err := classifyPayload(payload)
	if err != nil {
		return nil, err
	}
	if err := checkAmzHeadersSigned(r, a); err != nil {
		return nil, err
	}
	res := &Result{
		AccessKey:     a.accessKey,
		Region:        a.region,
		Time:          t,
		SessionToken:  r.Header.Get("X-Amz-Security-Token"),
		SignedHeaders: a.signedHeaders,
	}
	return v.finish(r, a, res, amzDate, payload, mode, "")
}

func (v *Verifier) verifyPresigned(r *http.Request, a *auth) (*Result, error) {
	if err := v.checkScope(a, ErrAuthorizationQueryParametersError); err != nil {
		return nil, err
	}
	t, err := time.Parse(timeFormat, a.amzDate)
	if err != nil {
		return nil, ErrAuthorizationQueryParametersError.with("X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"")
	}
	if t.Format(dateFormat) != a.date {
		return nil, ErrAuthorizationQueryParametersError.with("Invalid credential date %q. Date is not the same as X-Amz-Date: %q.", a.date, t.Format(dateFormat))
	}
	now := v.now()
	if t.Sub(now) > v.maxSkew() {
		return nil, ErrNotYetValid
	}
	expires := t.Add(a.expires)
	if now.After(expires) {
		return nil, ErrExpired.with("Request has expired (X-Amz-Expires %d s from %s)", int64(a.expires/time.Second), a.amzDate)
	}
	// A presigned URL carries no body hash: S3 signs UNSIGNED-PAYLOAD
	// unless the signer put a hash in the query or a signed header.
	payload := a.payloadHash
	if payload == "" && a.signs("x-amz-content-sha256") {
		payload = r.Header.Get("X-Amz-Content-Sha256")
	}
	if payload == "" {
		payload = "UNSIGNED-PAYLOAD"
	}
	mode, err := classifyPayload(payload)
	if err != nil {
		return nil, err
	}
	if err := checkAmzHeadersSigned(r, a); err != nil {
		return nil, err
	}
	res := &Result{
		AccessKey:     a.accessKey,
		Presigned:     true,
		Region:        a.region,
		Time:          t,
		Expires:       expires,
		SessionToken:  a.sessionToken,
		SignedHeaders: a.signedHeaders,
	}
	return v.finish(r, a, res, a.amzDate, payload, mode, "X-Amz-Signature")
}

// finish looks up the secret, checks the signature and installs the body
// reader.
func (v *Verifier) finish(r *http.Request, a *auth, res *Result, amzDate, payload string, mode PayloadMode, skipQuery string) (*Result, error) {
	decoded := int64(-1)
	if mode.Streaming() {
		var err error
		if decoded, err = decodedLength(r, mode); err != nil {
			return nil, err
		}
	}
	secret, ok := v.Creds.SecretKey(a.accessKey)
	if !ok {
		return nil, ErrInvalidAccessKeyID
	}
	key := signingKey(secret, a.date, a.region, a.service)
	scope := a.scope()
	matched := ""
	for _, cr := range canonicalRequests(r, a.signedHeaders, payload, skipQuery) {
		if signatureMatches(key, stringToSign(amzDate, scope, cr), a.signature) {
			matched = cr
			break
		}
	}
	if matched == "" {
		return nil, ErrSignatureDoesNotMatch
	}
	res.PayloadMode = mode
	res.DecodedContentLength = decoded
	switch mode {
	case PayloadSigned:
		res.PayloadSHA256 = strings.ToLower(payload)
		r.Body = newSHA256Reader(r.Body, res.PayloadSHA256)
	case PayloadStreamingSigned, PayloadStreamingSignedTrailer, PayloadStreamingUnsignedTrailer:
		trailers, err := declaredTrailers(r, mode)
		if err != nil {
			return nil, err
		}
		cr := newChunkReader(r.Body, chunkConfig{
			signed:   mode != PayloadStreamingUnsignedTrailer,
			trailers: mode != PayloadStreamingSigned,
			key:      key,
			amzDate:  amzDate,
			scope:    scope,
			seed:     a.signature,
			declared: decoded,
			expect:   trailers,
		})
		res.chunks = cr
		r.Body = cr
		r.ContentLength = decoded
	}
	return res, nil
}

// requestTime returns the signing time of a header-signed request and its
// ISO 8601 form for the string to sign: X-Amz-Date, else Date. The header
// used must itself be signed, or it could be replayed with a new time.
func requestTime(r *http.Request, a *auth) (time.Time, string, error) {
	if s := r.Header.Get("X-Amz-Date"); s != "" {
		t, err := time.Parse(timeFormat, s)
		if err != nil {
			return time.Time{}, "", ErrMissingDate.with("X-Amz-Date %q is not in the ISO 8601 basic format yyyyMMddTHHmmssZ", s)
		}
		if !a.signs("x-amz-date") {
			return time.Time{}, "", ErrAuthorizationHeaderMalformed.with("the x-amz-date header must be signed")
		}
		return t, s, nil
	}
	if s := r.Header.Get("Date"); s != "" {
		t, err := parseHTTPDate(s)
		if err != nil {
			return time.Time{}, "", ErrMissingDate.with("Date %q is not an HTTP date", s)
		}
		if !a.signs("date") {
			return time.Time{}, "", ErrAuthorizationHeaderMalformed.with("the date header must be signed")
		}
		t = t.UTC()
		return t, t.Format(timeFormat), nil
	}
	return time.Time{}, "", ErrMissingDate
}

// checkAmzHeadersSigned rejects x-amz-* headers the signature does not
// cover: they change what S3 does (copy source, ACL, encryption, ...).
func checkAmzHeadersSigned(r *http.Request, a *auth) error {
	for name := range r.Header {
		lower := strings.ToLower(name)
		if strings.HasPrefix(lower, "x-amz-") && !a.signs(lower) {
			return ErrHeadersNotSigned.with("There were headers present in the request which were not signed: %s", lower)
		}
	}
	return nil
}
