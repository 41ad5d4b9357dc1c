package objectapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"strings"

	"github.com/kelpfs/kelp/internal/filer"
)

// Keys that are objects and prefixes of other keys at once ("a" and
// "a/b"). The path /bucket/a can be a file or a directory, not both, so
// while "a" collides with a directory the object "a" is kept apart: its
// latest version is the file Root/.shadows/<bucket>/<h> (h as for the
// versions directory, the key in xattr s3.key) and the directory a carries
// the xattr s3.shadow = "1" saying so. Both change together, in the
// transaction that writes or removes the version. When the last entry
// below the directory goes (and it is no directory object), the version
// moves back to /bucket/a as a plain file (see tidy), so a key that
// collides with nothing is always the file at its path. Moves are renames:
// an entry's chunks stay with it, and the filer collects them when it goes.

const xaShadow = "s3.shadow" // "1" on a directory whose key is also an object kept apart

func (l *Layer) shadowsDir(bucket string) string { return l.root + "/.shadows/" + bucket }

// shadowPath is where the latest version of key lives while key's path is
// a directory.
func (l *Layer) shadowPath(bucket, key string) string {
	sum := sha256.Sum256([]byte(key))
	return l.shadowsDir(bucket) + "/" + hex.EncodeToString(sum[:16])
}

func hasShadow(d *filer.Entry) bool { return d.IsDir() && string(d.Xattrs[xaShadow]) == "1" }

// finder looks entries up, in a transaction (filer.Batch) or not.
type finder interface {
	Find(p string) (*filer.Entry, error)
}

type nsFinder struct {
	ctx context.Context
	ns  Namespace
}

func (f nsFinder) Find(p string) (*filer.Entry, error) { return f.ns.FindEntry(f.ctx, p) }

// slot is where the latest version of a key (not ending in '/') is or
// goes.
type slot struct {
	path string       // the key's path, or its shadow path when dir is set
	dir  *filer.Entry // the directory at the key's path, if it is one
	cur  *filer.Entry // the latest version (object or delete marker), nil none
}

func (s slot) shadowed() bool { return s.dir != nil }

// locate finds key's slot: one lookup unless the key's path is a
// directory.
func (l *Layer) locate(f finder, bucket, key string) (slot, error) {
	p := l.bucketPath(bucket) + "/" + key
	e, err := f.Find(p)
	switch {
	case errors.Is(err, filer.ErrNotFound) || errors.Is(err, filer.ErrNotDir):
		return slot{path: p}, nil
	case err != nil:
		return slot{}, err
	case !e.IsDir():
		return slot{path: p, cur: e}, nil
	}
	s := slot{path: l.shadowPath(bucket, key), dir: e}
	if !hasShadow(e) {
		return s, nil
	}
	cur, err := f.Find(s.path)
	if err != nil && !errors.Is(err, filer.ErrNotFound) {
		return slot{}, err
	}
	s.cur = cur
	return s, nil
}

// locateNow is locate outside a transaction. A version moving between the
// shadow path and the key's path meanwhile can make the second lookup
// miss; looking again then finds it where it went.
func (l *Layer) locateNow(ctx context.Context, bucket, key string) (slot, error) {
	f := nsFinder{ctx, l.ns}
	for try := 0; ; try++ {
		s, err := l.locate(f, bucket, key)
		if err != nil || try == 2 || !s.shadowed() || s.cur != nil || !hasShadow(s.dir) {
			return s, err
		}
	}
}

// shadowedVersion returns the latest version of key, whose directory a
// listing found flagged: one lookup, unless the version moved meanwhile.
func (l *Layer) shadowedVersion(ctx context.Context, bucket, key string) (*filer.Entry, error) {
	e, err := l.ns.FindEntry(ctx, l.shadowPath(bucket, key))
	if !errors.Is(err, filer.ErrNotFound) {
		return e, err
	}
	s, err := l.locateNow(ctx, bucket, key)
	return s.cur, err
}

// place stores e as the latest version in slot s, in tx: at the key's path
// (turning ancestors that are files into shadowed directories), or at the
// shadow path, flagging the directory.
func (l *Layer) place(tx filer.Batch, bucket, key string, s slot, e *filer.Entry) error {
	e.Path = s.path
	if !s.shadowed() {
		delete(e.Xattrs, xaKey) // set by an earlier try of the transaction
		if s.cur == nil {
			if err := l.ensureParents(tx, bucket, key); err != nil {
				return err
			}
		}
		return tx.Create(e, filer.CreateOptions{})
	}
	if e.Xattrs == nil {
		e.Xattrs = map[string][]byte{}
	}
	e.Xattrs[xaKey] = []byte(key)
	if err := tx.Create(e, filer.CreateOptions{}); err != nil {
		return err
	}
	return l.setShadowFlag(tx, s.dir, true)
}

// unplace removes the latest version in slot s (its chunks collected).
func (l *Layer) unplace(tx filer.Batch, s slot) error {
	if err := tx.Delete(s.path, false); err != nil && !errors.Is(err, filer.ErrNotFound) {
		return err
	}
	if s.shadowed() {
		return l.setShadowFlag(tx, s.dir, false)
	}
	return nil
}

// moveInto renames v (a noncurrent version) into slot s, as the key's
// latest version; only a shadowed one keeps its key in s3.key.
func (l *Layer) moveInto(tx filer.Batch, v *filer.Entry, s slot, key string) error {
	if err := tx.Rename(v.Path, s.path); err != nil {
		return err
	}
	_, keyed := v.Xattrs[xaKey]
	if keyed == s.shadowed() {
		return nil
	}
	e := v.Clone()
	e.Path = s.path
	if e.Xattrs == nil {
		e.Xattrs = map[string][]byte{}
	}
	if s.shadowed() {
		e.Xattrs[xaKey] = []byte(key)
	} else {
		delete(e.Xattrs, xaKey)
	}
	if err := tx.Update(e); err != nil {
		return err
	}
	if s.shadowed() {
		return l.setShadowFlag(tx, s.dir, true)
	}
	return nil
}

func (l *Layer) setShadowFlag(tx filer.Batch, dir *filer.Entry, on bool) error {
	if hasShadow(dir) == on {
		return nil
	}
	d, err := tx.Find(dir.Path) // as it is now in tx
	if err != nil {
		return err
	}
	if d.Xattrs == nil {
		d.Xattrs = map[string][]byte{}
	}
	if on {
		d.Xattrs[xaShadow] = []byte("1")
	} else {
		delete(d.Xattrs, xaShadow)
	}
	return tx.Update(d)
}

// ensureParents makes sure that the ancestors of key's path that exist
// are directories: a file there is an object (or delete marker) whose key
// is a prefix of key, and is moved to its shadow path, a flagged
// directory taking its place. Missing ancestors are left to the create.
func (l *Layer) ensureParents(tx filer.Batch, bucket, key string) error {
	i := strings.LastIndexByte(key, '/')
	if i <= 0 {
		return nil
	}
	parent := key[:i]
	d, err := tx.Find(l.bucketPath(bucket) + "/" + parent)
	switch {
	case errors.Is(err, filer.ErrNotFound):
		return l.ensureParents(tx, bucket, parent)
	case err != nil:
		return err
	case d.IsDir():
		return nil
	}
	return l.shadow(tx, bucket, parent, d)
}

// shadow moves the file f, key's latest version at key's path, to the
// shadow path and puts a flagged directory in its place.
func (l *Layer) shadow(tx filer.Batch, bucket, key string, f *filer.Entry) error {
	sp := l.shadowPath(bucket, key)
	if err := tx.Rename(f.Path, sp); err != nil {
		return err
	}
	moved := f.Clone()
	moved.Path = sp
	if moved.Xattrs == nil {
		moved.Xattrs = map[string][]byte{}
	}
	moved.Xattrs[xaKey] = []byte(key)
	if err := tx.Update(moved); err != nil {
		return err
	}
	d := &filer.Entry{Path: f.Path, Mode: os.ModeDir | 0o755, Xattrs: map[string][]byte{xaShadow: []byte("1")}}
	return tx.Create(d, filer.CreateOptions{Exclusive: true})
}

// tidy runs after something below directory dir was removed: each
// directory from dir up to the bucket that holds nothing and is no
// directory object goes, and one that shadows an object is replaced by
// that object (a plain file again, as no key collides with it any more).
// Failure only leaves a directory behind.
func (l *Layer) tidy(ctx context.Context, bucket, dir string) {
	bdir := l.bucketPath(bucket)
	for ; dir != bdir && filer.IsAncestor(bdir, dir); dir, _ = filer.SplitPath(dir) {
		key := strings.TrimPrefix(dir, bdir+"/")
		removed := false
		err := l.ns.Atomically(ctx, func(tx filer.Batch) error {
			removed = false
			d, err := tx.Find(dir)
			if err != nil || !d.IsDir() || isDirObject(d) {
				return err
			}
			es, _, err := tx.List(dir, filer.ListOptions{Limit: 1})
			if err != nil || len(es) > 0 {
				return err
			}
			if err := tx.Delete(dir, false); err != nil {
				return err
			}
			removed = true
			if !hasShadow(d) {
				return nil
			}
			removed = false // the parent now holds the object
			sp := l.shadowPath(bucket, key)
			if err := tx.Rename(sp, dir); err != nil {
				if errors.Is(err, filer.ErrNotFound) {
					return nil
				}
				return err
			}
			f, err := tx.Find(dir)
			if err != nil {
				return err
			}
			delete(f.Xattrs, xaKey)
			return tx.Update(f)
		})
		if err != nil && !errors.Is(err, filer.ErrNotFound) {
			l.log.Warn("objectapi: tidying a directory", "dir", dir, "err", err)
		}
		if err != nil || !removed {
			return
		}
	}
}

// tidyAbove tidies the directories above the key's path p.
func (l *Layer) tidyAbove(ctx context.Context, bucket, p string) {
	dir, _ := filer.SplitPath(p)
	l.tidy(ctx, bucket, dir)
}
