package objectapi

import (
	"strconv"
	"strings"
	"time"
)

// Conditions are the HTTP preconditions of a read (If-Match, If-None-Match,
// If-Modified-Since, If-Unmodified-Since) or of a copy source
// (x-amz-copy-source-if-*). Zero fields are absent.
type Conditions struct {
	IfMatch           string
	IfNoneMatch       string
	IfModifiedSince   time.Time
	IfUnmodifiedSince time.Time
}

// check evaluates c against an object as RFC 9110 orders it (which is what
// S3 does): a failing If-Match, or If-Unmodified-Since without If-Match, is
// ErrPreconditionFailed; a matching If-None-Match, or If-Modified-Since
// without If-None-Match that finds no change, is ErrNotModified. For a copy
// source every failure is ErrPreconditionFailed.
func (c Conditions) check(etag string, mod time.Time, copySource bool) error {
	mod = mod.Truncate(time.Second)
	if c.IfMatch != "" {
		if !etagMatches(c.IfMatch, etag) {
			return errorf(ErrPreconditionFailed, "If-Match")
		}
	} else if !c.IfUnmodifiedSince.IsZero() && mod.After(c.IfUnmodifiedSince) {
		return errorf(ErrPreconditionFailed, "If-Unmodified-Since")
	}
	notModified := ErrNotModified
	if copySource {
		notModified = ErrPreconditionFailed
	}
	if c.IfNoneMatch != "" {
		if etagMatches(c.IfNoneMatch, etag) {
			return errorf(notModified, "If-None-Match")
		}
	} else if !c.IfModifiedSince.IsZero() && !mod.After(c.IfModifiedSince) {
		return errorf(notModified, "If-Modified-Since")
	}
	return nil
}

// etagMatches reports whether a list of entity tags ("*", quoted or not,
// weak or strong, comma-separated) names etag.
func etagMatches(list, etag string) bool {
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimSpace(t)
		if t == "*" {
			return true
		}
		t = strings.TrimPrefix(t, "W/")
		if strings.Trim(t, `"`) == etag {
			return true
		}
	}
	return false
}

// Range is a requested byte range: bytes=First-Last, bytes=First- (Last
// < 0) or bytes=-Suffix (First < 0).
type Range struct {
	First, Last int64
	Suffix      int64
}

// ParseRange parses a Range header. Like S3 it ignores (returns nil for)
// what it cannot use: syntax errors, other units and multiple ranges.
func ParseRange(h string) *Range {
	spec, ok := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return nil
	}
	a, b, ok := strings.Cut(strings.TrimSpace(spec), "-")
	if !ok {
		return nil
	}
	num := func(s string) (int64, bool) {
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil && n >= 0 && s != "" && s[0] != '+'
	}
	if a == "" {
		n, ok := num(b)
		if !ok {
			return nil
		}
		return &Range{First: -1, Last: -1, Suffix: n}
	}
	first, ok := num(a)
	if !ok {
		return nil
	}
	if b == "" {
		return &Range{First: first, Last: -1}
	}
	last, ok := num(b)
	if !ok || last < first {
		return nil
	}
	return &Range{First: first, Last: last}
}

// resolve returns the offset and length of r in an object of size bytes,
// or ErrInvalidRange.
func (r *Range) resolve(size int64) (int64, int64, error) {
	if r.First < 0 {
		if r.Suffix == 0 || size == 0 {
			return 0, 0, errorf(ErrInvalidRange, "suffix of %d bytes of a %d-byte object", r.Suffix, size)
		}
		n := min(r.Suffix, size)
		return size - n, n, nil
	}
	if r.First >= size {
		return 0, 0, errorf(ErrInvalidRange, "range starts at %d, the object has %d bytes", r.First, size)
	}
	last := size - 1
	if r.Last >= 0 && r.Last < last {
		last = r.Last
	}
	return r.First, last - r.First + 1, nil
}
