package objectapi

import (
	"context"
	"errors"
	"strings"

	"github.com/kelpfs/kelp/internal/filer"
)

// ListVersionsOptions select a page of ListObjectVersions.
type ListVersionsOptions struct {
	Prefix    string
	Delimiter string
	// KeyMarker and VersionIDMarker continue after that version of that
	// key; KeyMarker alone continues after all versions of the key.
	KeyMarker       string
	VersionIDMarker string
	MaxKeys         int // versions, delete markers and common prefixes
}

// ListVersionsResult is one page of ListObjectVersions: versions (and
// delete markers, DeleteMarker set) in key order, newest first per key,
// IsLatest on each key's current version; VersionID is "null" for null
// versions.
type ListVersionsResult struct {
	Versions            []ObjectInfo
	CommonPrefixes      []string
	IsTruncated         bool
	NextKeyMarker       string
	NextVersionIDMarker string
}

// ListObjectVersions lists every version of the keys with the prefix.
// The key order comes from the walk of ListObjects, which sees each key
// with any version, since a key's latest version (object or delete
// marker) is always at its path; the noncurrent versions of each key are
// then read from its versions directory, already newest first.
func (l *Layer) ListObjectVersions(ctx context.Context, bucket string, opts ListVersionsOptions) (ListVersionsResult, error) {
	b, err := l.bucketEntry(ctx, bucket)
	if err != nil {
		return ListVersionsResult{}, err
	}
	vr := &ListVersionsResult{}
	ls := &lister{l: l, ctx: ctx, bucket: bucket, prefix: opts.Prefix, delim: opts.Delimiter, after: opts.KeyMarker,
		max: opts.MaxKeys, ver: vr, versioned: versioningOf(b) != ""}
	if opts.MaxKeys <= 0 {
		return *vr, nil
	}
	if opts.KeyMarker != "" && opts.VersionIDMarker != "" && strings.HasPrefix(opts.KeyMarker, opts.Prefix) {
		err = ls.resume(opts.KeyMarker, opts.VersionIDMarker)
	}
	if err == nil {
		err = ls.run()
	}
	if err != nil && !errors.Is(err, errStop) {
		return ListVersionsResult{}, err
	}
	vr.CommonPrefixes = ls.res.CommonPrefixes
	vr.IsTruncated = vr.IsTruncated || ls.res.IsTruncated
	return *vr, nil
}

// resume lists the versions of key that follow version marker.
func (ls *lister) resume(key, marker string) error {
	_, dirKey, err := ls.l.objectPath(ls.bucket, key)
	if err != nil || dirKey || !ls.versioned {
		return nil // a directory object has a single version, which the marker named
	}
	s, err := ls.l.locateNow(ls.ctx, ls.bucket, key)
	if err != nil || s.cur == nil {
		return err
	}
	emit := func(e *filer.Entry) error { return ls.emitVersion(key, e, false) }
	if versionIDOf(s.cur) == marker {
		return ls.l.archived(ls.ctx, ls.bucket, key, "", emit)
	}
	if marker != NullVersion {
		// A noncurrent version is named by its ID, in listing order: the
		// page continues after that name, without reading the versions
		// before it (nor skipping the rest of the key if it is gone).
		return ls.l.archived(ls.ctx, ls.bucket, key, marker, emit)
	}
	// The null version is not named by its ID: find it, then go on.
	seen := false
	return ls.l.archived(ls.ctx, ls.bucket, key, "", func(e *filer.Entry) error {
		if seen {
			return ls.emitVersion(key, e, false)
		}
		seen = versionIDOf(e) == marker
		return nil
	})
}

// addVersions reports every version of key, whose latest is cur.
func (ls *lister) addVersions(key string, cur *filer.Entry) error {
	if err := ls.emitVersion(key, cur, true); err != nil {
		return err
	}
	if !ls.versioned || cur.IsDir() {
		return nil
	}
	return ls.l.archived(ls.ctx, ls.bucket, key, "", func(e *filer.Entry) error {
		return ls.emitVersion(key, e, false)
	})
}

func (ls *lister) emitVersion(key string, e *filer.Entry, latest bool) error {
	if ls.n == ls.max {
		ls.ver.IsTruncated = true
		return errStop
	}
	ls.n++
	oi := ls.l.versionInfo(ls.bucket, key, e)
	oi.VersionID, oi.IsLatest = versionIDOf(e), latest
	ls.ver.Versions = append(ls.ver.Versions, oi)
	ls.ver.NextKeyMarker, ls.ver.NextVersionIDMarker = key, oi.VersionID
	return nil
}
