package objectapi

import (
	"context"
	"errors"

	"github.com/kelpfs/kelp/internal/filer"
)

// DeleteObjectVersion deletes version vid of key permanently, or with vid
// "" the latest version: an unversioned bucket removes the object, an
// Enabled bucket adds a delete marker with a new version id, a Suspended
// one a delete marker with the id "null" (replacing the null version).
// A missing key or version is not an error (S3 answers 204 either way).
func (l *Layer) DeleteObjectVersion(ctx context.Context, bucket, key, vid string) (DeleteResult, error) {
	return l.DeleteObjectIf(ctx, bucket, key, vid, WriteConditions{})
}

// DeleteObjectIf is DeleteObjectVersion when the conditions c hold for the
// version it deletes (with vid "" the current one), checked in the
// transaction that deletes; ErrPreconditionFailed (or ErrNoSuchKey for an
// If-Match on a missing key) when they do not, and nothing is deleted.
func (l *Layer) DeleteObjectIf(ctx context.Context, bucket, key, vid string, c WriteConditions) (DeleteResult, error) {
	res := DeleteResult{Key: key}
	check := l.checker(bucket, key, c)
	p, dirKey, err := l.objectPath(bucket, key)
	if errors.Is(err, ErrUnsupportedKey) {
		if _, err := l.bucketEntry(ctx, bucket); err != nil {
			return res, err
		}
		return res, nil // no object can have this key
	}
	if err != nil {
		return res, err
	}
	b, err := l.bucketEntry(ctx, bucket)
	if err != nil {
		return res, err
	}
	if vid != "" {
		if !validVersionID(vid) {
			return res, errorf(ErrInvalidArgument, "invalid version id %q", vid)
		}
		res.VersionID = vid
		if dirKey {
			// Directory objects keep no versions: "null" is the only one.
			if vid != NullVersion {
				return res, nil
			}
			return res, l.removeObject(ctx, bucket, key, check)
		}
		res.DeleteMarker, err = l.deleteVersion(ctx, bucket, key, p, vid, check)
		return res, err
	}
	if versioningOf(b) == "" || dirKey {
		return res, l.removeObject(ctx, bucket, key, check)
	}
	dm := &filer.Entry{Path: p, Mode: 0o644, Mtime: l.now(), Xattrs: map[string][]byte{xaDeleteMarker: []byte("1")}}
	res.VersionID, err = l.commitObject(ctx, bucket, key, b, dm, commitOptions{check: check})
	if err != nil {
		return res, nsErr(err, key)
	}
	res.DeleteMarker = true
	return res, nil
}

// deleteVersion removes version vid of key at path p; when it is the
// current one, the newest noncurrent version takes its place in the same
// transaction (so a concurrent write is never replaced). It reports
// whether the version was a delete marker. check (nil: none) is called
// with the version (nil when there is none) before it goes.
func (l *Layer) deleteVersion(ctx context.Context, bucket, key, p, vid string, check func(*filer.Entry) error) (bool, error) {
	var current, marker, emptied bool
	var s slot
	err := l.ns.Atomically(ctx, func(tx filer.Batch) error {
		current, marker, emptied = false, false, false
		var err error
		if s, err = l.locate(tx, bucket, key); err != nil {
			return err
		}
		if s.cur == nil || versionIDOf(s.cur) != vid {
			return nil // not the current version
		}
		current, marker = true, isDeleteMarker(s.cur)
		if err := l.checkUnlocked(ctx, s.cur); err != nil {
			return err
		}
		if check != nil {
			if err := check(s.cur); err != nil {
				return err
			}
		}
		newest, err := l.newestArchived(tx, bucket, key)
		if err != nil {
			return err
		}
		if newest != nil {
			// Rename replaces the current entry and collects its chunks.
			return l.moveInto(tx, newest, s, key)
		}
		emptied = true
		return l.unplace(tx, s)
	})
	if err != nil {
		return false, err
	}
	if current {
		switch {
		case emptied && s.shadowed():
			l.tidy(ctx, bucket, p)
		case emptied:
			l.tidyAbove(ctx, bucket, p)
		}
		l.removeIfEmpty(ctx, bucket, key)
		return marker, nil
	}
	e, err := l.findArchived(ctx, bucket, key, vid)
	if err == nil && check != nil {
		err = check(e) // a noncurrent version never changes: no race
	}
	if err != nil || e == nil {
		return false, err
	}
	err = l.ns.Atomically(ctx, func(tx filer.Batch) error {
		cur, err := tx.Find(e.Path)
		if errors.Is(err, filer.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := l.checkUnlocked(ctx, cur); err != nil {
			return err
		}
		return tx.Delete(e.Path, false)
	})
	if err != nil {
		return false, err
	}
	l.removeIfEmpty(ctx, bucket, key)
	return isDeleteMarker(e), nil
}

// newestArchived returns key's newest noncurrent version in tx, or nil.
func (l *Layer) newestArchived(tx filer.Batch, bucket, key string) (*filer.Entry, error) {
	dir := l.keyVersionsDir(bucket, key)
	after := ""
	for {
		es, more, err := tx.List(dir, filer.ListOptions{StartAfter: after, Limit: 16})
		if errors.Is(err, filer.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			if !e.IsDir() {
				return e, nil
			}
			after = e.Name()
		}
		if !more {
			return nil, nil
		}
	}
}
