package objectapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/kelpfs/kelp/internal/filer"
)

// Versioning states of a bucket. A bucket that was never configured has
// the state "" (unversioned); once Enabled it can only be Suspended.
const (
	VersioningEnabled   = "Enabled"
	VersioningSuspended = "Suspended"
	// NullVersion is the version id of objects written while a bucket is
	// unversioned or suspended.
	NullVersion = "null"
)

const (
	xaVersioning   = "s3.versioning" // on a bucket: Enabled | Suspended
	xaVID          = "s3.vid"        // on a version: its id; absent means "null"
	xaDeleteMarker = "s3.dm"         // "1" on a delete marker
)

// DeleteMarkerError is returned when the version a request resolves to is
// a delete marker: Kind is ErrNoSuchKey (the latest version is a delete
// marker) or ErrMethodNotAllowed (the marker was asked for by id). The
// gateway answers with x-amz-delete-marker: true and the marker's id.
type DeleteMarkerError struct {
	VersionID string
	Kind      error
}

func (e *DeleteMarkerError) Error() string { return e.Kind.Error() + " (delete marker)" }
func (e *DeleteMarkerError) Unwrap() error { return e.Kind }

// GetBucketVersioning returns the bucket's versioning state: "",
// VersioningEnabled or VersioningSuspended.
func (l *Layer) GetBucketVersioning(ctx context.Context, bucket string) (string, error) {
	b, err := l.bucketEntry(ctx, bucket)
	if err != nil {
		return "", err
	}
	return versioningOf(b), nil
}

// PutBucketVersioning sets the versioning state to VersioningEnabled or
// VersioningSuspended; anything else is ErrMalformedInput.
func (l *Layer) PutBucketVersioning(ctx context.Context, bucket, status string) error {
	if status != VersioningEnabled && status != VersioningSuspended {
		return errorf(ErrMalformedInput, "versioning status %q is neither Enabled nor Suspended", status)
	}
	return l.updateBucket(ctx, bucket, func(e *filer.Entry) error {
		if err := checkVersioningChange(e, status); err != nil {
			return err
		}
		e.Xattrs[xaVersioning] = []byte(status)
		return nil
	})
}

// versioned reports whether the bucket was ever versioned (a failed
// lookup counts as versioned: the caller then takes the general path).
func (l *Layer) versioned(ctx context.Context, bucket string) bool {
	b, err := l.bucketEntry(ctx, bucket)
	return err != nil || versioningOf(b) != ""
}

func versioningOf(b *filer.Entry) string { return string(b.Xattrs[xaVersioning]) }

func isDeleteMarker(e *filer.Entry) bool { return string(e.Xattrs[xaDeleteMarker]) == "1" }

// versionIDOf is the version id of a stored version ("null" when unset).
func versionIDOf(e *filer.Entry) string {
	if v := e.Xattrs[xaVID]; len(v) > 0 {
		return string(v)
	}
	return NullVersion
}

// newVersionID returns 16 hex digits of the inverted creation time in
// nanoseconds and 16 random hex digits: unique, and in byte order the
// newer version sorts first, so a key's versions directory lists newest
// first.
func (l *Layer) newVersionID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], ^uint64(l.now().UnixNano()))
	rand.Read(b[8:])
	return hex.EncodeToString(b[:])
}

// validVersionID accepts "null" and ids made by newVersionID.
func validVersionID(v string) bool {
	if v == NullVersion {
		return true
	}
	if len(v) != 32 {
		return false
	}
	_, err := hex.DecodeString(v)
	return err == nil && strings.ToLower(v) == v
}

func (l *Layer) versionsDir(bucket string) string { return l.root + "/.versions/" + bucket }

// keyVersionsDir is the directory of key's noncurrent versions: named by
// a hash of the key, since keys may be longer than a name and hold '/'.
func (l *Layer) keyVersionsDir(bucket, key string) string {
	sum := sha256.Sum256([]byte(key))
	return l.versionsDir(bucket) + "/" + hex.EncodeToString(sum[:16])
}

// archiveName is a noncurrent version's name in its key's directory: the
// version id, or for a null version its inverted modification time and
// "null", so that names sort newest first either way.
func archiveName(e *filer.Entry) string {
	if vid := versionIDOf(e); vid != NullVersion {
		return vid
	}
	return fmt.Sprintf("%016x", ^uint64(e.Mtime.UnixNano())) + NullVersion
}

// archive moves the current version cur of key into the versions
// directory, within tx. Rename keeps the chunks (nothing is collected).
func (l *Layer) archive(tx filer.Batch, bucket, key string, cur *filer.Entry) error {
	dir := l.keyVersionsDir(bucket, key)
	d := &filer.Entry{Path: dir, Mode: os.ModeDir | 0o755, Xattrs: map[string][]byte{xaKey: []byte(key)}}
	if err := tx.Create(d, filer.CreateOptions{}); err != nil {
		return err
	}
	return tx.Rename(cur.Path, dir+"/"+archiveName(cur))
}

// archived calls fn with key's noncurrent versions, newest first, whose
// names sort after after ("" from the newest).
func (l *Layer) archived(ctx context.Context, bucket, key, after string, fn func(e *filer.Entry) error) error {
	dir := l.keyVersionsDir(bucket, key)
	for {
		es, more, err := l.ns.ListEntries(ctx, dir, filer.ListOptions{StartAfter: after, Limit: pageSize})
		if errors.Is(err, filer.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, e := range es {
			after = e.Name()
			if e.IsDir() {
				continue
			}
			if err := fn(e); err != nil {
				return err
			}
		}
		if !more {
			return nil
		}
	}
}

// findArchived returns the noncurrent version vid of key, or nil.
func (l *Layer) findArchived(ctx context.Context, bucket, key, vid string) (*filer.Entry, error) {
	if vid != NullVersion {
		e, err := l.ns.FindEntry(ctx, l.keyVersionsDir(bucket, key)+"/"+vid)
		if errors.Is(err, filer.ErrNotFound) {
			return nil, nil
		}
		return e, err
	}
	var found *filer.Entry
	err := l.archived(ctx, bucket, key, "", func(e *filer.Entry) error {
		if versionIDOf(e) == NullVersion {
			found = e
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return found, err
}

// removeIfEmpty deletes key's versions directory when it holds nothing.
func (l *Layer) removeIfEmpty(ctx context.Context, bucket, key string) {
	err := l.ns.DeleteEntry(ctx, l.keyVersionsDir(bucket, key), false)
	if err != nil && !errors.Is(err, filer.ErrNotFound) && !errors.Is(err, filer.ErrNotEmpty) {
		l.log.Warn("objectapi: removing a versions directory", "key", key, "err", err)
	}
}

// commitOptions are checks and work done in the transaction that commits
// an object.
type commitOptions struct {
	// exclusive fails with filer.ErrExists when the key has a current
	// object (If-None-Match: *).
	exclusive bool
	// check, when set, is called with the key's current entry (nil when
	// there is none) and fails the commit with its error: the
	// preconditions of the write (WriteConditions), a compare-and-swap.
	check func(cur *filer.Entry) error
	// also runs in the same transaction (multipart completion removes
	// its upload there, so that two completions cannot both commit).
	also func(filer.Batch) error
}

func (o commitOptions) run(tx filer.Batch) error {
	if o.also == nil {
		return nil
	}
	return o.also(tx)
}

// commitObject stores e as the new latest version of key (not a directory
// object) according to the state of bucket b, and returns its version id:
// "" unversioned, "null" suspended, a new id when enabled. The previous
// latest version is archived when it must be kept, in the same
// transaction as the write, so that no crash or concurrent reader finds
// the key without its latest version. See commitOptions for the checks
// made in that transaction. An unversioned write is one filer call, unless
// the key collides with a directory (shadow.go) or the write has
// conditions.
func (l *Layer) commitObject(ctx context.Context, bucket, key string, b *filer.Entry, e *filer.Entry, opts commitOptions) (string, error) {
	state := versioningOf(b)
	if state == "" && opts.check == nil && opts.also == nil {
		p := e.Path
		err := l.ns.CreateEntry(ctx, e, filer.CreateOptions{Exclusive: opts.exclusive})
		if !collides(err) {
			return "", err
		}
		e.Path = p // the key's path or an ancestor is a directory: see below
	}
	if e.Xattrs == nil {
		e.Xattrs = map[string][]byte{}
	}
	l.applyDefaultRetention(b, e)
	vid := ""
	var oldNull *filer.Entry // a suspended bucket's write replaces the noncurrent null version
	switch state {
	case VersioningSuspended:
		vid = NullVersion
		delete(e.Xattrs, xaVID)
		var err error
		if oldNull, err = l.findArchived(ctx, bucket, key, NullVersion); err != nil {
			return "", err
		}
	case VersioningEnabled:
		vid = l.newVersionID()
		e.Xattrs[xaVID] = []byte(vid)
	}
	err := l.ns.Atomically(ctx, func(tx filer.Batch) error {
		s, err := l.locate(tx, bucket, key)
		if err != nil {
			return err
		}
		cur := s.cur
		if opts.exclusive && cur != nil && !isDeleteMarker(cur) {
			return fmt.Errorf("%w: %s", filer.ErrExists, key)
		}
		if opts.check != nil {
			if err := opts.check(cur); err != nil {
				return err
			}
		}
		// A current null version in a suspended bucket is replaced (its
		// chunks collected); any other current version is kept.
		if state != "" && cur != nil && (state == VersioningEnabled || versionIDOf(cur) != NullVersion) {
			if err := l.archive(tx, bucket, key, cur); err != nil {
				return err
			}
		}
		if oldNull != nil {
			if err := tx.Delete(oldNull.Path, false); err != nil && !errors.Is(err, filer.ErrNotFound) {
				return err
			}
		}
		if err := opts.run(tx); err != nil {
			return err
		}
		return l.place(tx, bucket, key, s, e)
	})
	if err != nil {
		return "", err
	}
	return vid, nil
}

// collides reports a failed create that the general path of commitObject
// can resolve: the key's path is a directory, an ancestor is a file, or
// (exclusive) something exists that may be a directory.
func collides(err error) bool {
	return errors.Is(err, filer.ErrIsDir) || errors.Is(err, filer.ErrNotDir) || errors.Is(err, filer.ErrExists)
}

// findVersion returns version vid of key ("" the latest) and whether it
// is the current one. A delete marker is returned as such; callers decide.
func (l *Layer) findVersion(ctx context.Context, bucket, key, vid string) (*filer.Entry, bool, error) {
	if vid == "" {
		e, err := l.findObject(ctx, bucket, key)
		return e, true, err
	}
	if !validVersionID(vid) {
		return nil, false, errorf(ErrInvalidArgument, "invalid version id %q", vid)
	}
	p, dirKey, err := l.objectPath(bucket, key)
	if err != nil {
		if errors.Is(err, ErrUnsupportedKey) {
			return nil, false, errorf(ErrNoSuchVersion, "%q version %s", key, vid)
		}
		return nil, false, err
	}
	if _, err := l.bucketEntry(ctx, bucket); err != nil {
		return nil, false, err
	}
	if dirKey {
		cur, err := l.ns.FindEntry(ctx, p)
		switch {
		case err == nil && isDirObject(cur) && vid == NullVersion:
			return cur, true, nil
		case err != nil && !errors.Is(err, filer.ErrNotFound):
			return nil, false, err
		}
	} else {
		s, err := l.locateNow(ctx, bucket, key)
		if err != nil {
			return nil, false, err
		}
		if s.cur != nil && versionIDOf(s.cur) == vid {
			return s.cur, true, nil
		}
		e, err := l.findArchived(ctx, bucket, key, vid)
		if err != nil || e != nil {
			return e, false, err
		}
	}
	return nil, false, errorf(ErrNoSuchVersion, "%q version %s", key, vid)
}

// readableVersion resolves a read of version vid ("" latest): a delete
// marker is a DeleteMarkerError.
func (l *Layer) readableVersion(ctx context.Context, bucket, key, vid string) (ObjectInfo, *filer.Entry, error) {
	e, _, err := l.findVersion(ctx, bucket, key, vid)
	if err != nil {
		return ObjectInfo{}, nil, err
	}
	if isDeleteMarker(e) {
		return ObjectInfo{}, nil, &DeleteMarkerError{VersionID: versionIDOf(e),
			Kind: errorf(ErrMethodNotAllowed, "version %s of %q is a delete marker", vid, key)}
	}
	oi := l.versionInfo(bucket, key, e)
	if vid == NullVersion {
		oi.VersionID = NullVersion
	}
	return oi, e, nil
}

// versionInfo describes a version of key stored anywhere.
func (l *Layer) versionInfo(bucket, key string, e *filer.Entry) ObjectInfo {
	oi := l.info(bucket, e)
	oi.Key = key
	return oi
}

// VersioningOf is a bucket entry's versioning state ("", VersioningEnabled
// or VersioningSuspended), for tools that read the entry directly (the
// admin UI, over the filer's gRPC API).
func VersioningOf(b *filer.Entry) string { return versioningOf(b) }

// SetVersioning changes a bucket entry's versioning state as
// PutBucketVersioning does (the same checks), for tools that write the
// entry directly; the caller stores the entry.
func SetVersioning(b *filer.Entry, status string) error {
	if status != VersioningEnabled && status != VersioningSuspended {
		return errorf(ErrMalformedInput, "versioning status %q is neither Enabled nor Suspended", status)
	}
	if b.Xattrs == nil {
		b.Xattrs = map[string][]byte{}
	}
	if err := checkVersioningChange(b, status); err != nil {
		return err
	}
	b.Xattrs[xaVersioning] = []byte(status)
	return nil
}
