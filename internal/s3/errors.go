package s3

import (
	"context"
	"encoding/xml"
	"errors"
	"net"
	"net/http"
	"strings"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/filer"
	"github.com/kelpfs/kelp/internal/objectapi"
	"github.com/kelpfs/kelp/internal/s3/sigv4"
)

// apiError is an S3 error: the Code of the XML body and the HTTP status.
type apiError struct {
	Code    string
	Status  int
	Message string
}

func (e *apiError) Error() string { return "s3: " + e.Code + ": " + e.Message }

func newErr(code string, status int, msg string) *apiError {
	return &apiError{Code: code, Status: status, Message: msg}
}

// Errors raised by the HTTP layer itself.
var (
	errAccessDenied     = newErr("AccessDenied", http.StatusForbidden, "Access Denied")
	errMalformedXML     = newErr("MalformedXML", http.StatusBadRequest, "The XML you provided was not well-formed or did not validate against our published schema.")
	errInvalidArgument  = newErr("InvalidArgument", http.StatusBadRequest, "Invalid Argument")
	errInvalidRequest   = newErr("InvalidRequest", http.StatusBadRequest, "Invalid Request")
	errNotImplemented   = newErr("NotImplemented", http.StatusNotImplemented, "A header or query you provided implies functionality that is not implemented.")
	errMethodNotAllowed = newErr("MethodNotAllowed", http.StatusMethodNotAllowed, "The specified method is not allowed against this resource.")
	errInvalidDigest    = newErr("InvalidDigest", http.StatusBadRequest, "The Content-MD5 you specified is not valid.")
	errMissingLength    = newErr("MissingContentLength", http.StatusLengthRequired, "You must provide the Content-Length HTTP header.")
	errInvalidToken     = newErr("InvalidToken", http.StatusBadRequest, "Session tokens are not supported by this server.")
	errCORSNotEnabled   = newErr("AccessForbidden", http.StatusForbidden, "CORSResponse: CORS is not enabled for this bucket.")
	errCORSNotAllowed   = newErr("AccessForbidden", http.StatusForbidden, "CORSResponse: This CORS request is not allowed.")
	errBadPreflight     = newErr("BadRequest", http.StatusBadRequest, "Insufficient information. Origin request header needed.")
	errUnavailable      = newErr("ServiceUnavailable", http.StatusServiceUnavailable, "The cluster cannot serve this request right now (no master, or a volume server cannot be reached). Please try again.")
	errInternal         = newErr("InternalError", http.StatusInternalServerError, "We encountered an internal error. Please try again.")
	errSlowDown         = newErr("RequestTimeout", http.StatusBadRequest, "Your socket connection to the server was not read from or written to within the timeout period.")
	errBucketOwned      = newErr("BucketAlreadyOwnedByYou", http.StatusConflict, "Your previous request to create the named bucket succeeded and you already own it.")
	errPolicyTooLarge   = newErr("MalformedPolicy", http.StatusBadRequest, "Policies must be no more than 20 KB")
	errNoSuchPolicy     = newErr("NoSuchBucketPolicy", http.StatusNotFound, "The bucket policy does not exist")
	errNoSuchLifecycle  = newErr("NoSuchLifecycleConfiguration", http.StatusNotFound, "The lifecycle configuration does not exist")
	errNoSuchEncryption = newErr("ServerSideEncryptionConfigurationNotFoundError", http.StatusNotFound, "The server side encryption configuration was not found")
	errNoSuchObjectLock = newErr("ObjectLockConfigurationNotFoundError", http.StatusNotFound, "Object Lock configuration does not exist for this bucket")
	errNoSuchWebsite    = newErr("NoSuchWebsiteConfiguration", http.StatusNotFound, "The specified bucket does not have a website configuration")
)

// objectErrors is the one table from object-layer and namespace errors
// to S3 errors. Order matters only where an error could match twice.
var objectErrors = []struct {
	err error
	api *apiError
}{
	{objectapi.ErrNoSuchBucket, newErr("NoSuchBucket", 404, "The specified bucket does not exist")},
	{objectapi.ErrBucketExists, errBucketOwned},
	{objectapi.ErrBucketNotEmpty, newErr("BucketNotEmpty", 409, "The bucket you tried to delete is not empty")},
	{objectapi.ErrInvalidBucketName, newErr("InvalidBucketName", 400, "The specified bucket is not valid.")},
	{objectapi.ErrNoSuchKey, newErr("NoSuchKey", 404, "The specified key does not exist.")},
	{objectapi.ErrNoSuchVersion, newErr("NoSuchVersion", 404, "The specified version does not exist.")},
	{objectapi.ErrMethodNotAllowed, errMethodNotAllowed},
	{objectapi.ErrInvalidKey, newErr("InvalidArgument", 400, "The key is not valid.")},
	{objectapi.ErrKeyTooLong, newErr("KeyTooLongError", 400, "Your key is too long")},
	{objectapi.ErrUnsupportedKey, newErr("InvalidArgument", 400, "This key cannot be stored.")},
	{objectapi.ErrKeyConflict, newErr("ObjectConflict", 409, "The key conflicts with an entry in the namespace that the gateway cannot resolve.")},
	{objectapi.ErrPreconditionFailed, newErr("PreconditionFailed", 412, "At least one of the pre-conditions you specified did not hold")},
	{objectapi.ErrNotModified, newErr("NotModified", 304, "Not Modified")},
	{objectapi.ErrInvalidRange, newErr("InvalidRange", 416, "The requested range is not satisfiable")},
	{objectapi.ErrBadDigest, newErr("BadDigest", 400, "The Content-MD5 or checksum you specified did not match what we received.")},
	{objectapi.ErrInvalidDigest, errInvalidDigest},
	{objectapi.ErrEntityTooLarge, newErr("EntityTooLarge", 400, "Your proposed upload exceeds the maximum allowed object size.")},
	{objectapi.ErrNoSuchUpload, newErr("NoSuchUpload", 404, "The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.")},
	{objectapi.ErrInvalidPart, newErr("InvalidPart", 400, "One or more of the specified parts could not be found.")},
	{objectapi.ErrInvalidPartOrder, newErr("InvalidPartOrder", 400, "The list of parts was not in ascending order.")},
	{objectapi.ErrEntityTooSmall, newErr("EntityTooSmall", 400, "Your proposed upload is smaller than the minimum allowed object size.")},
	{objectapi.ErrMalformedInput, errMalformedXML},
	{objectapi.ErrMalformedPolicy, newErr("MalformedPolicy", 400, "The policy is not valid.")},
	{objectapi.ErrNoSuchBucketPolicy, errNoSuchPolicy},
	{objectapi.ErrNoSuchLifecycle, errNoSuchLifecycle},
	{objectapi.ErrObjectLocked, newErr("AccessDenied", 403, "Access Denied because object protected by object lock.")},
	{objectapi.ErrNoObjectLockConfig, errNoSuchObjectLock},
	{objectapi.ErrInvalidBucketState, newErr("InvalidBucketState", 409, "The request is not valid with the current state of the bucket.")},
	{objectapi.ErrNoSuchCORS, newErr("NoSuchCORSConfiguration", 404, "The CORS configuration does not exist")},
	{objectapi.ErrNoSuchTagSet, newErr("NoSuchTagSet", 404, "The TagSet does not exist")},
	{objectapi.ErrInvalidTag, newErr("InvalidTag", 400, "The tag provided was not a valid tag.")},
	{objectapi.ErrInvalidCopySource, newErr("InvalidRequest", 400, "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.")},
	{objectapi.ErrNotImplemented, errNotImplemented},
	{objectapi.ErrMissingContentLength, errMissingLength},
	{objectapi.ErrInvalidArgument, errInvalidArgument},
	{objectapi.ErrInvalidRequest, errInvalidRequest},
	{filer.ErrInvalidPath, newErr("InvalidArgument", 400, "The key cannot be stored.")},
	// A quota on the bucket's directory (or one above it) is full. Not an
	// AWS code (S3 has no bucket quotas); 403 so that SDKs do not retry.
	{filer.ErrQuotaExceeded, newErr("QuotaExceeded", 403, "The bucket's quota does not allow this write.")},
	{chunk.ErrNotFound, newErr("InternalError", 500, "Object data is missing on the volume servers.")},
}

// toAPIError maps any error to the S3 error to send. Client mistakes are
// 4xx with the detail of the wrapped error as message; only what is left
// is InternalError.
func toAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var se *sigv4.Error
	if errors.As(err, &se) {
		return &apiError{Code: se.Code, Status: se.Status, Message: se.Message}
	}
	for _, m := range objectErrors {
		if errors.Is(err, m.err) {
			e := *m.api
			if m.api.Status < 500 {
				// A refusal from inside a filer transaction carries the
				// filer's store prefix, which says nothing to a client.
				e.Message = strings.TrimPrefix(err.Error(), filer.ErrStore.Error()+": ")
			}
			return &e
		}
	}
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return newErr("EntityTooLarge", 400, "Your proposed upload exceeds the maximum allowed size.")
	case errors.Is(err, context.DeadlineExceeded): // before net.Error, which it also is
		return errSlowDown
	case clusterUnavailable(err):
		return errUnavailable
	}
	return errInternal
}

// clusterUnavailable reports whether err says the cluster cannot take the
// request now (no master answers, a volume server cannot be reached, a
// master or volume server answered 503): a 503 that SDKs retry, not an
// InternalError.
func clusterUnavailable(err error) bool {
	var ne net.Error
	var he *client.HTTPError
	return errors.Is(err, client.ErrNoMaster) || errors.Is(err, client.ErrNoAnswer) ||
		errors.As(err, &ne) || (errors.As(err, &he) && he.Status == http.StatusServiceUnavailable)
}

type errorBody struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string
	Message   string
	Resource  string `xml:",omitempty"`
	RequestID string `xml:"RequestId"`
	HostID    string `xml:"HostId"`
}

// writeError sends err as an S3 XML error (no body for HEAD and 304).
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ae := toAPIError(err)
	if ae.Status >= 500 {
		s.log.Error("s3: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	} else {
		s.log.Debug("s3: request refused", "method", r.Method, "path", r.URL.Path, "code", ae.Code, "err", err)
	}
	var dm *objectapi.DeleteMarkerError
	if errors.As(err, &dm) {
		w.Header().Set("x-amz-delete-marker", "true")
		w.Header().Set("x-amz-version-id", dm.VersionID)
	}
	if ae.Status == http.StatusNotModified {
		w.WriteHeader(ae.Status)
		return
	}
	if r.Method == http.MethodHead {
		w.Header().Set("x-amz-error-code", ae.Code)
		w.WriteHeader(ae.Status)
		return
	}
	id := w.Header().Get("x-amz-request-id")
	writeXML(w, ae.Status, errorBody{Code: ae.Code, Message: ae.Message, Resource: r.URL.Path, RequestID: id, HostID: id})
}
