package objectapi

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/kelpfs/kelp/internal/filer"
)

// WriteConditions are the preconditions of a write (PutObject, CopyObject,
// CompleteMultipartUpload) or a delete on the key's current version. They
// are checked in the transaction that writes or deletes, so that no other
// writer can come between the check and the change. Zero fields are absent.
type WriteConditions struct {
	// IfMatch is a list of entity tags or "*": the current version must
	// have one of them; a key with no current version is ErrNoSuchKey.
	IfMatch string
	// IfNoneMatch is "*" (the key must have no current version) or a
	// list of entity tags the current version must not have (RFC 9110).
	IfNoneMatch string
	// IfUnmodifiedSince (RFC 9110 §13.1.4), when IfMatch is absent: the
	// current version must not have been modified after it (to the
	// second); a key with no current version has no modification date,
	// so the condition is ignored there, as S3 does on a GET.
	IfUnmodifiedSince time.Time
	// IfMatchLastModified and IfMatchSize (deletes only): the current
	// version must have been modified at that time (to the second) and
	// have that size; a key with no current version passes, as in S3.
	IfMatchLastModified time.Time
	IfMatchSize         *int64
}

func (c WriteConditions) empty() bool {
	return c.IfMatch == "" && c.IfNoneMatch == "" && c.IfUnmodifiedSince.IsZero() && c.IfMatchLastModified.IsZero() && c.IfMatchSize == nil
}

// currentVersion is the entry e found at key's path when it is the key's
// live object (nil otherwise: absent, a delete marker, an implicit
// directory, or a file where the key names a directory object or the
// other way round).
func currentVersion(key string, e *filer.Entry) *filer.Entry {
	if e == nil || isDeleteMarker(e) || e.IsDir() != strings.HasSuffix(key, "/") || e.IsDir() && !isDirObject(e) {
		return nil
	}
	return e
}

// check evaluates c against cur, the entry at the key's path (nil when
// there is none).
func (l *Layer) checkWrite(bucket, key string, cur *filer.Entry, c WriteConditions) error {
	cur = currentVersion(key, cur)
	if cur == nil {
		if c.IfMatch != "" {
			return errorf(ErrNoSuchKey, "%q (If-Match)", key)
		}
		return nil
	}
	etag := l.info(bucket, cur).ETag
	switch {
	case c.IfMatch != "" && !etagMatches(c.IfMatch, etag):
		return errorf(ErrPreconditionFailed, "If-Match: %q has ETag %q", key, etag)
	case c.IfMatch == "" && modifiedAfter(cur.Mtime, c.IfUnmodifiedSince):
		return errorf(ErrPreconditionFailed, "If-Unmodified-Since: %q was modified at %s", key, cur.Mtime.UTC().Format(time.RFC1123))
	case c.IfNoneMatch != "" && etagMatches(c.IfNoneMatch, etag):
		return errorf(ErrPreconditionFailed, "If-None-Match: %q exists with ETag %q", key, etag)
	case !c.IfMatchLastModified.IsZero() && !cur.Mtime.Truncate(time.Second).Equal(c.IfMatchLastModified.Truncate(time.Second)):
		return errorf(ErrPreconditionFailed, "x-amz-if-match-last-modified-time: %q was modified at %s", key, cur.Mtime.UTC().Format(time.RFC1123))
	case c.IfMatchSize != nil && cur.Size != *c.IfMatchSize:
		return errorf(ErrPreconditionFailed, "x-amz-if-match-size: %q has %d bytes", key, cur.Size)
	}
	return nil
}

// modifiedAfter reports whether mtime is after t (when t is set), to the
// second, as HTTP dates have no finer precision.
func modifiedAfter(mtime, t time.Time) bool {
	return !t.IsZero() && mtime.Truncate(time.Second).After(t.Truncate(time.Second))
}

// checker returns c as a check of the entry found in a transaction (nil
// when there is nothing to check).
func (l *Layer) checker(bucket, key string, c WriteConditions) func(cur *filer.Entry) error {
	if c.empty() {
		return nil
	}
	return func(cur *filer.Entry) error { return l.checkWrite(bucket, key, cur, c) }
}

// precheck evaluates c against the key's current state before a write
// streams its data, so that a write bound to fail is refused before the
// body is stored; the write checks again when it commits.
func (l *Layer) precheck(ctx context.Context, p, bucket, key string, c WriteConditions) error {
	if c.empty() {
		return nil
	}
	var cur *filer.Entry
	var err error
	if strings.HasSuffix(key, "/") {
		cur, err = l.ns.FindEntry(ctx, p)
	} else {
		var s slot // the key's object, wherever a collision put it (shadow.go)
		s, err = l.locateNow(ctx, bucket, key)
		cur = s.cur
	}
	if err != nil && !errors.Is(err, filer.ErrNotFound) && !errors.Is(err, filer.ErrNotDir) {
		return err
	}
	return l.checkWrite(bucket, key, cur, c)
}

// refusedInTransaction reports whether err is a refusal that a
// transaction's own function returned (a precondition, a vanished upload
// or key, a replaced part): the transaction was rolled back, so nothing it
// would have referred to is in use.
func refusedInTransaction(err error) bool {
	for _, e := range []error{ErrPreconditionFailed, ErrNoSuchKey, ErrNoSuchUpload, ErrInvalidPart} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
