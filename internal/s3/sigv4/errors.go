package sigv4

import (
	"fmt"
	"net/http"
)

// Error is an authentication failure in S3 terms: Code is the S3 error
// code the gateway puts in its XML error body and Status the HTTP status.
// Every error returned by Verify, and every error other than io.EOF returned
// by a body installed by Verify, is (or wraps) an *Error.
//
// The exported Err* values are sentinels: an *Error returned by this package
// carries its own Message but matches exactly one sentinel with errors.Is,
// so callers test the condition, not the text.
type Error struct {
	Code    string
	Status  int
	Message string

	kind *Error // the sentinel this error is an instance of; nil for sentinels
}

func (e *Error) Error() string {
	return "sigv4: " + e.Code + ": " + e.Message
}

// Is reports whether target is the sentinel e was made from.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	return e == t || (e.kind != nil && e.kind == t)
}

// with returns a new instance of sentinel e with a more specific message.
func (e *Error) with(format string, args ...any) *Error {
	return &Error{Code: e.Code, Status: e.Status, Message: fmt.Sprintf(format, args...), kind: e}
}

func sentinel(code string, status int, msg string) *Error {
	return &Error{Code: code, Status: status, Message: msg}
}

// Sentinels. Codes and statuses are those S3 returns for the same condition.
var (
	// ErrInvalidAccessKeyID: the access key in the credential is unknown.
	ErrInvalidAccessKeyID = sentinel("InvalidAccessKeyId", http.StatusForbidden,
		"The AWS Access Key Id you provided does not exist in our records.")
	// ErrSignatureDoesNotMatch: the request, a chunk or the trailer was not
	// signed with the secret key of the access key it names.
	ErrSignatureDoesNotMatch = sentinel("SignatureDoesNotMatch", http.StatusForbidden,
		"The request signature we calculated does not match the signature you provided. Check your key and signing method.")
	// ErrRequestTimeTooSkewed: the request time is further than MaxSkew from
	// the server's clock.
	ErrRequestTimeTooSkewed = sentinel("RequestTimeTooSkewed", http.StatusForbidden,
		"The difference between the request time and the current time is too large.")
	// ErrAuthorizationHeaderMalformed: the Authorization header cannot be
	// parsed or names a wrong region, service, date or terminator.
	ErrAuthorizationHeaderMalformed = sentinel("AuthorizationHeaderMalformed", http.StatusBadRequest,
		"The authorization header is malformed.")
	// ErrAuthorizationQueryParametersError: the X-Amz-* query parameters of a
	// presigned URL are missing or malformed.
	ErrAuthorizationQueryParametersError = sentinel("AuthorizationQueryParametersError", http.StatusBadRequest,
		"Error parsing the X-Amz-Credential parameter.")
	// ErrExpired: a presigned URL used after X-Amz-Date + X-Amz-Expires.
	ErrExpired = sentinel("AccessDenied", http.StatusForbidden, "Request has expired")
	// ErrNotYetValid: a presigned URL whose X-Amz-Date is in the future
	// (beyond MaxSkew).
	ErrNotYetValid = sentinel("AccessDenied", http.StatusForbidden, "Request is not valid yet")
	// ErrMissingDate: neither X-Amz-Date nor Date is present and signed.
	ErrMissingDate = sentinel("AccessDenied", http.StatusForbidden,
		"AWS authentication requires a valid Date or x-amz-date header")
	// ErrHeadersNotSigned: an x-amz-* header is present but not signed, so
	// it could have been added or changed in transit.
	ErrHeadersNotSigned = sentinel("AccessDenied", http.StatusForbidden,
		"There were headers present in the request which were not signed")
	// ErrMissingSecurityHeader: a header SigV4 for S3 requires is absent
	// (x-amz-content-sha256, x-amz-decoded-content-length for streaming).
	ErrMissingSecurityHeader = sentinel("MissingSecurityHeader", http.StatusBadRequest,
		"Your request was missing a required header.")
	// ErrInvalidContentSHA256: x-amz-content-sha256 is neither a hex SHA-256
	// nor one of the payload modes this package knows.
	ErrInvalidContentSHA256 = sentinel("InvalidArgument", http.StatusBadRequest,
		"x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER, STREAMING-UNSIGNED-PAYLOAD-TRAILER or a valid sha256 value.")
	// ErrContentSHA256Mismatch: the body's SHA-256 differs from the signed
	// x-amz-content-sha256 (returned by the body's Read at EOF).
	ErrContentSHA256Mismatch = sentinel("XAmzContentSHA256Mismatch", http.StatusBadRequest,
		"The provided 'x-amz-content-sha256' header does not match what was computed.")
	// ErrUnsupportedAuth: Signature Version 2, SigV4a or another scheme.
	ErrUnsupportedAuth = sentinel("InvalidRequest", http.StatusBadRequest,
		"The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.")
	// ErrMultipleAuth: both an Authorization header and presigned query
	// parameters.
	ErrMultipleAuth = sentinel("InvalidArgument", http.StatusBadRequest,
		"Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified")
	// ErrIncompleteBody: the aws-chunked body ended early or its decoded size
	// differs from x-amz-decoded-content-length.
	ErrIncompleteBody = sentinel("IncompleteBody", http.StatusBadRequest,
		"You did not provide the number of bytes specified by the x-amz-decoded-content-length HTTP header.")
	// ErrMalformedChunk: the aws-chunked framing (chunk header line, CRLF
	// after data, chunk extensions) is not well formed.
	ErrMalformedChunk = sentinel("IncompleteBody", http.StatusBadRequest,
		"The aws-chunked request body is not well formed.")
	// ErrMalformedTrailer: trailing headers are missing, not declared in
	// x-amz-trailer, or not well formed.
	ErrMalformedTrailer = sentinel("MalformedTrailerError", http.StatusBadRequest,
		"The request contained trailing data that was not well-formed or did not conform to our published schema.")
	// ErrBadDigest: a trailing x-amz-checksum-* does not match the data.
	ErrBadDigest = sentinel("BadDigest", http.StatusBadRequest,
		"The checksum you specified did not match the calculated checksum.")
)
