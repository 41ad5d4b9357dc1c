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
	res := DeleteResult{Key: key}
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
			return res, l.removeObject(ctx, bucket, key)
		}
		res.DeleteMarker, err = l.deleteVersion(ctx, bucket, key, p, vid)
		return res, err
	}
	if versioningOf(b) == "" || dirKey {
		return res, l.removeObject(ctx, bucket, key)
	}
	dm := &filer.Entry{Path: p, Mode: 0o644, Mtime: l.now(), Xattrs: map[string][]byte{xaDeleteMarker: []byte("1")}}
	res.VersionID, err = l.commitObject(ctx, bucket, key, b, dm, false)
	if err != nil {
		err = nsErr(err, key)
		if errors.Is(err, ErrKeyConflict) {
			// The key is a prefix of other keys (or below an object): it
			// has no version a marker could hide.
			return DeleteResult{Key: key}, nil
		}
		return res, err
	}
	res.DeleteMarker = true
	return res, nil
}

// deleteVersion removes version vid of key at path p; when it is the
// current one, the newest noncurrent version takes its place in the same
// rename. It reports whether the version was a delete marker.
func (l *Layer) deleteVersion(ctx context.Context, bucket, key, p, vid string) (bool, error) {
	cur, err := l.ns.FindEntry(ctx, p)
	if err != nil && !errors.Is(err, filer.ErrNotFound) && !errors.Is(err, filer.ErrNotDir) {
		return false, err
	}
	if err == nil && !cur.IsDir() && versionIDOf(cur) == vid {
		var newest *filer.Entry
		err := l.archived(ctx, bucket, key, "", func(e *filer.Entry) error {
			newest = e
			return errStop
		})
		if err != nil && !errors.Is(err, errStop) {
			return false, err
		}
		if newest != nil {
			// Rename replaces the current entry and collects its chunks.
			if err := l.ns.Rename(ctx, newest.Path, p); err != nil {
				return false, err
			}
			l.removeIfEmpty(ctx, bucket, key)
			return isDeleteMarker(cur), nil
		}
		if err := l.ns.DeleteEntry(ctx, p, false); err != nil && !errors.Is(err, filer.ErrNotFound) {
			return false, err
		}
		l.pruneParents(ctx, bucket, p)
		l.removeIfEmpty(ctx, bucket, key)
		return isDeleteMarker(cur), nil
	}
	e, err := l.findArchived(ctx, bucket, key, vid)
	if err != nil || e == nil {
		return false, err
	}
	if err := l.ns.DeleteEntry(ctx, e.Path, false); err != nil && !errors.Is(err, filer.ErrNotFound) {
		return false, err
	}
	l.removeIfEmpty(ctx, bucket, key)
	return isDeleteMarker(e), nil
}
