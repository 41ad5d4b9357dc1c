package sigv4

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// maxAuthorizationLen bounds the Authorization header we are willing to
// parse; real ones are a few hundred bytes.
const maxAuthorizationLen = 8 << 10

// parseAuthorization parses
//
//	AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=<64 hex>
//
// Separators between the three components may be ',' with or without
// spaces; each component must appear exactly once.
func parseAuthorization(h string) (*auth, error) {
	if len(h) > maxAuthorizationLen {
		return nil, ErrAuthorizationHeaderMalformed.with("the authorization header is too long")
	}
	rest, ok := strings.CutPrefix(strings.TrimSpace(h), algorithm)
	if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '\t') {
		return nil, ErrAuthorizationHeaderMalformed
	}
	var cred, signed, sig string
	var seen [3]bool
	for _, part := range strings.Split(rest, ",") {
		part = strings.TrimSpace(part)
		k, val, ok := strings.Cut(part, "=")
		if !ok {
			return nil, ErrAuthorizationHeaderMalformed.with("the authorization header is malformed; %q is not of the form key=value", part)
		}
		var dst *string
		var i int
		switch k {
		case "Credential":
			dst, i = &cred, 0
		case "SignedHeaders":
			dst, i = &signed, 1
		case "Signature":
			dst, i = &sig, 2
		default:
			return nil, ErrAuthorizationHeaderMalformed.with("the authorization header is malformed; unknown component %q", k)
		}
		if seen[i] {
			return nil, ErrAuthorizationHeaderMalformed.with("the authorization header is malformed; %s appears twice", k)
		}
		seen[i] = true
		*dst = val
	}
	if !seen[0] || !seen[1] || !seen[2] {
		return nil, ErrAuthorizationHeaderMalformed.with("the authorization header requires Credential, SignedHeaders and Signature")
	}
	a := &auth{}
	if err := parseCredential(a, cred, ErrAuthorizationHeaderMalformed); err != nil {
		return nil, err
	}
	var err error
	if a.signedHeaders, err = parseSignedHeaders(signed, ErrAuthorizationHeaderMalformed); err != nil {
		return nil, err
	}
	if !validSignature(sig) {
		return nil, ErrAuthorizationHeaderMalformed.with("the signature must be 64 lower-case hexadecimal characters")
	}
	a.signature = sig
	return a, nil
}

// parseCredential splits AK/date/region/service/aws4_request. The access
// key is everything before the last four fields, so a self-chosen key may
// contain '/'.
func parseCredential(a *auth, cred string, malformed *Error) error {
	parts := strings.Split(cred, "/")
	if len(parts) < 5 {
		return malformed.with("the Credential %q must be of the form <access key>/<date>/<region>/<service>/aws4_request", cred)
	}
	n := len(parts)
	a.accessKey = strings.Join(parts[:n-4], "/")
	a.date, a.region, a.service = parts[n-4], parts[n-3], parts[n-2]
	if a.accessKey == "" {
		return malformed.with("the Credential has an empty access key")
	}
	if _, err := time.Parse(dateFormat, a.date); err != nil || len(a.date) != 8 {
		return malformed.with("the Credential date %q is not of the form yyyyMMdd", a.date)
	}
	if a.region == "" {
		return malformed.with("the Credential has an empty region")
	}
	if parts[n-1] != terminator {
		return malformed.with("the Credential terminator %q must be %q", parts[n-1], terminator)
	}
	return nil
}

func parseSignedHeaders(s string, malformed *Error) ([]string, error) {
	if s == "" {
		return nil, malformed.with("SignedHeaders is empty")
	}
	names := strings.Split(s, ";")
	for _, n := range names {
		if n == "" || n != strings.ToLower(n) || strings.ContainsAny(n, " \t:\r\n") {
			return nil, malformed.with("SignedHeaders %q must be lower-case header names separated by ';'", s)
		}
	}
	return names, nil
}

func validSignature(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// parsePresigned reads the X-Amz-* parameters of a presigned URL.
func parsePresigned(q url.Values) (*auth, error) {
	bad := ErrAuthorizationQueryParametersError
	if alg := q.Get("X-Amz-Algorithm"); alg != algorithm {
		if alg == "AWS4-ECDSA-P256-SHA256" {
			return nil, ErrUnsupportedAuth.with("Signature Version 4A is not supported. Please use %s.", algorithm)
		}
		return nil, bad.with("X-Amz-Algorithm only supports %q", algorithm)
	}
	for _, k := range []string{"X-Amz-Credential", "X-Amz-Signature", "X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Expires"} {
		if len(q[k]) != 1 || q.Get(k) == "" {
			return nil, bad.with("Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters (exactly once each).")
		}
	}
	a := &auth{amzDate: q.Get("X-Amz-Date"), sessionToken: q.Get("X-Amz-Security-Token"), payloadHash: q.Get("X-Amz-Content-Sha256")}
	if err := parseCredential(a, q.Get("X-Amz-Credential"), bad); err != nil {
		return nil, err
	}
	var err error
	if a.signedHeaders, err = parseSignedHeaders(q.Get("X-Amz-SignedHeaders"), bad); err != nil {
		return nil, err
	}
	sig := q.Get("X-Amz-Signature")
	if !validSignature(sig) {
		return nil, bad.with("X-Amz-Signature must be 64 lower-case hexadecimal characters")
	}
	a.signature = sig
	exp, err := strconv.ParseInt(q.Get("X-Amz-Expires"), 10, 64)
	if err != nil {
		return nil, bad.with("X-Amz-Expires should be a number")
	}
	if exp < 0 {
		return nil, bad.with("X-Amz-Expires must be non-negative")
	}
	if exp > int64(maxPresignExpiry/time.Second) {
		return nil, bad.with("X-Amz-Expires must be less than a week (in seconds) that is 604800")
	}
	a.expires = time.Duration(exp) * time.Second
	return a, nil
}

// classifyPayload maps an x-amz-content-sha256 value to its mode.
func classifyPayload(v string) (PayloadMode, error) {
	switch v {
	case "UNSIGNED-PAYLOAD":
		return PayloadUnsigned, nil
	case "STREAMING-AWS4-HMAC-SHA256-PAYLOAD":
		return PayloadStreamingSigned, nil
	case "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER":
		return PayloadStreamingSignedTrailer, nil
	case "STREAMING-UNSIGNED-PAYLOAD-TRAILER":
		return PayloadStreamingUnsignedTrailer, nil
	case "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD", "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD-TRAILER":
		return 0, ErrUnsupportedAuth.with("Signature Version 4A payloads (%s) are not supported", v)
	}
	if len(v) == 64 && isHex(v) {
		return PayloadSigned, nil
	}
	return 0, ErrInvalidContentSHA256
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// decodedLength reads x-amz-decoded-content-length. S3 requires it for
// streaming uploads; for the unsigned-trailer mode a missing header is
// tolerated (-1) since nothing is lost: the chunk sizes still frame the body.
func decodedLength(r *http.Request, mode PayloadMode) (int64, error) {
	s := r.Header.Get("X-Amz-Decoded-Content-Length")
	if s == "" {
		if mode == PayloadStreamingUnsignedTrailer {
			return -1, nil
		}
		return 0, ErrMissingSecurityHeader.with("Missing required header for this request: x-amz-decoded-content-length")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, ErrMissingSecurityHeader.with("x-amz-decoded-content-length %q is not a non-negative integer", s)
	}
	return n, nil
}

// maxTrailers bounds the number of trailing headers a request may declare.
const maxTrailers = 8

// declaredTrailers returns the lower-case names listed in x-amz-trailer.
func declaredTrailers(r *http.Request, mode PayloadMode) ([]string, error) {
	if mode == PayloadStreamingSigned {
		return nil, nil
	}
	var names []string
	for _, v := range r.Header.Values("X-Amz-Trailer") {
		for _, n := range strings.Split(v, ",") {
			n = strings.ToLower(strings.TrimSpace(n))
			if n == "" {
				continue
			}
			if n == "x-amz-trailer-signature" || strings.ContainsAny(n, " \t:") {
				return nil, ErrMalformedTrailer.with("x-amz-trailer names an invalid trailer %q", n)
			}
			names = append(names, n)
		}
	}
	if len(names) > maxTrailers {
		return nil, ErrMalformedTrailer.with("x-amz-trailer declares more than %d trailers", maxTrailers)
	}
	return names, nil
}
