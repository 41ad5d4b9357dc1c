package objectapi

import "errors"

// Errors of this package; internal/s3 maps each to one S3 error code.
// Returned errors wrap them (test with errors.Is) and carry detail.
var (
	ErrNoSuchBucket         = errors.New("objectapi: no such bucket")
	ErrBucketExists         = errors.New("objectapi: bucket already exists")
	ErrBucketNotEmpty       = errors.New("objectapi: bucket not empty")
	ErrInvalidBucketName    = errors.New("objectapi: invalid bucket name")
	ErrNoSuchKey            = errors.New("objectapi: no such key")
	ErrInvalidKey           = errors.New("objectapi: invalid key")          // empty key
	ErrKeyTooLong           = errors.New("objectapi: key too long")         // over 1024 bytes
	ErrUnsupportedKey       = errors.New("objectapi: key cannot be stored") // see the package doc
	ErrKeyConflict          = errors.New("objectapi: key conflicts with another object's path")
	ErrPreconditionFailed   = errors.New("objectapi: precondition failed")
	ErrNotModified          = errors.New("objectapi: not modified")
	ErrInvalidRange         = errors.New("objectapi: range not satisfiable")
	ErrBadDigest            = errors.New("objectapi: content does not match its digest")
	ErrInvalidDigest        = errors.New("objectapi: malformed digest")
	ErrInvalidArgument      = errors.New("objectapi: invalid argument")
	ErrInvalidRequest       = errors.New("objectapi: invalid request") // a valid argument that does not fit the request
	ErrEntityTooLarge       = errors.New("objectapi: entity too large")
	ErrNoSuchUpload         = errors.New("objectapi: no such upload")
	ErrInvalidPart          = errors.New("objectapi: invalid part")
	ErrInvalidPartOrder     = errors.New("objectapi: parts not in ascending order")
	ErrEntityTooSmall       = errors.New("objectapi: part too small")
	ErrMalformedInput       = errors.New("objectapi: malformed input") // XML/JSON configuration documents
	ErrNoSuchCORS           = errors.New("objectapi: no CORS configuration")
	ErrNoSuchTagSet         = errors.New("objectapi: no tag set")
	ErrInvalidTag           = errors.New("objectapi: invalid tag")
	ErrInvalidCopySource    = errors.New("objectapi: copy onto itself without changes")
	ErrNotImplemented       = errors.New("objectapi: not implemented")
	ErrInvalidStorageClass  = errors.New("objectapi: invalid storage class")
	ErrMissingContentLength = errors.New("objectapi: missing content length")
	ErrNoSuchVersion        = errors.New("objectapi: no such version")
	ErrMethodNotAllowed     = errors.New("objectapi: method not allowed on a delete marker")
	ErrMalformedPolicy      = errors.New("objectapi: malformed bucket policy")
	ErrNoSuchBucketPolicy   = errors.New("objectapi: no bucket policy")
	ErrNoSuchLifecycle      = errors.New("objectapi: no lifecycle configuration")
)
