package s3

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kelpfs/kelp/internal/objectapi"
)

// ifUnmodifiedSince reads the If-Unmodified-Since of a write or a delete
// (RFC 9110 §13.1.4 applies it to any method). A value that is not an
// HTTP date is ignored, as §13.1.4 requires. If-Modified-Since is never
// read for a write or a delete: §13.1.3 says a recipient MUST ignore it
// for methods other than GET and HEAD.
func ifUnmodifiedSince(h http.Header) time.Time { return parseTime(h.Get("If-Unmodified-Since")) }

// deleteConditions reads the preconditions of a DeleteObject: If-Match,
// If-None-Match and If-Unmodified-Since (RFC 9110, which S3 does not
// define for DELETE but which are never ignored),
// x-amz-if-match-last-modified-time and x-amz-if-match-size.
func deleteConditions(h http.Header) (objectapi.WriteConditions, error) {
	c := objectapi.WriteConditions{IfMatch: h.Get("If-Match"), IfNoneMatch: h.Get("If-None-Match"),
		IfUnmodifiedSince: ifUnmodifiedSince(h)}
	var err error
	if v := h.Get("x-amz-if-match-last-modified-time"); v != "" {
		if c.IfMatchLastModified, err = parseConditionTime(v); err != nil {
			return c, &apiError{Code: "InvalidArgument", Status: http.StatusBadRequest,
				Message: "x-amz-if-match-last-modified-time must be an HTTP date: " + strconv.Quote(v)}
		}
	}
	if v := h.Get("x-amz-if-match-size"); v != "" {
		if c.IfMatchSize, err = parseConditionSize(v); err != nil {
			return c, &apiError{Code: "InvalidArgument", Status: http.StatusBadRequest,
				Message: "x-amz-if-match-size must be a number of bytes: " + strconv.Quote(v)}
		}
	}
	return c, nil
}

// parseConditionTime reads a timestamp as the SDKs send it (an HTTP date)
// or as S3 writes them in XML (ISO 8601).
func parseConditionTime(v string) (time.Time, error) {
	v = strings.TrimSpace(v)
	if t, err := http.ParseTime(v); err == nil {
		return t, nil
	}
	return time.Parse(time.RFC3339Nano, v)
}

func parseConditionSize(v string) (*int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return nil, strconv.ErrSyntax
	}
	return &n, nil
}

// deleteObjectConditions reads the conditions of one object of a
// DeleteObjects request.
func deleteObjectConditions(etag, lastModified, size string) (objectapi.WriteConditions, error) {
	c := objectapi.WriteConditions{IfMatch: etag}
	var err error
	if lastModified != "" {
		if c.IfMatchLastModified, err = parseConditionTime(lastModified); err != nil {
			return c, &apiError{Code: "InvalidArgument", Status: http.StatusBadRequest,
				Message: "LastModifiedTime must be a timestamp: " + strconv.Quote(lastModified)}
		}
	}
	if size != "" {
		if c.IfMatchSize, err = parseConditionSize(size); err != nil {
			return c, &apiError{Code: "InvalidArgument", Status: http.StatusBadRequest,
				Message: "Size must be a number of bytes: " + strconv.Quote(size)}
		}
	}
	return c, nil
}
