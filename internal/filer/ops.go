package filer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"time"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/crtime"
	"github.com/kelpfs/kelp/internal/filer/store"
)

// FindEntry returns the entry at path p.
func (f *Filer) FindEntry(ctx context.Context, p string) (*Entry, error) {
	p, err := CleanPath(p)
	if err != nil {
		return nil, err
	}
	v, err := f.st.Get(ctx, entryKey(p))
	if errors.Is(err, store.ErrNotFound) {
		return absentEntry(p)
	}
	if err != nil {
		return nil, storeErr(err)
	}
	return decodeEntry(p, v)
}

// ListOptions select a page of a directory listing.
type ListOptions struct {
	StartAfter string // list names after this one (exclusive); "" from the start
	Prefix     string // only names starting with Prefix
	Limit      int    // at most this many; <= 0 means 1000
}

// ListEntries returns the entries of directory dir in name order (bytewise),
// and whether more follow the page.
func (f *Filer) ListEntries(ctx context.Context, dir string, opts ListOptions) ([]*Entry, bool, error) {
	dir, err := CleanPath(dir)
	if err != nil {
		return nil, false, err
	}
	var out []*Entry
	more := false
	err = f.st.View(ctx, func(tx store.ReadTx) error {
		var err error
		out, more, err = listEntries(tx, dir, opts)
		return err
	})
	if err != nil {
		return nil, false, storeErr(err)
	}
	return out, more, nil
}

// listEntries lists clean directory dir in tx.
func listEntries(tx store.ReadTx, dir string, opts ListOptions) ([]*Entry, bool, error) {
	if opts.Limit <= 0 {
		opts.Limit = 1000
	}
	d, err := getEntry(tx, dir)
	if err != nil {
		return nil, false, err
	}
	if !d.IsDir() {
		return nil, false, fmt.Errorf("%w: %s", ErrNotDir, dir)
	}
	base := childPrefix(dir)
	start := append(append([]byte(nil), base...), opts.Prefix...)
	end := store.PrefixEnd(start)
	if opts.StartAfter != "" {
		after := append(append(append([]byte(nil), base...), opts.StartAfter...), 0)
		if string(after) > string(start) {
			start = after
		}
	}
	var out []*Entry
	more := false
	err = tx.Scan(start, end, opts.Limit+1, func(k, v []byte) error {
		if len(out) == opts.Limit {
			more = true
			return store.ErrStopScan
		}
		e, err := decodeEntry(JoinPath(dir, string(k[len(base):])), v)
		if err != nil {
			return err
		}
		out = append(out, e)
		return nil
	})
	return out, more, err
}

// CreateOptions tune CreateEntry.
type CreateOptions struct {
	// Exclusive fails with ErrExists when any entry is at the path.
	// Otherwise a file or symlink replaces a file or symlink, and creating an
	// existing directory is a no-op (like mkdir -p).
	Exclusive bool
	// NoParents fails with ErrNotFound when the parent directory is
	// missing, instead of creating it.
	NoParents bool
}

// CreateEntry stores e at e.Path. Missing parent directories are created.
// A replaced file's chunks that e does not keep are garbage-collected.
// Unset times are set to now.
func (f *Filer) CreateEntry(ctx context.Context, e *Entry, opts CreateOptions) error {
	p, err := CleanPath(e.Path)
	if err != nil {
		return err
	}
	if p == "/" {
		if e.IsDir() && !opts.Exclusive {
			return nil
		}
		return fmt.Errorf("%w: /", ErrExists)
	}
	e.Path = p
	return f.update(ctx, func(t *txn) error {
		return t.create(e.Clone(), opts)
	})
}

func (t *txn) create(e *Entry, opts CreateOptions) error {
	if e.Mtime.IsZero() {
		e.Mtime = t.now
	}
	if e.Crtime.IsZero() {
		e.Crtime = crtime.Unique(t.now)
	}
	e.Ctime = t.now
	old, err := t.get(e.Path)
	switch {
	case errors.Is(err, ErrNotFound):
		old = nil
	case err != nil:
		return err
	case opts.Exclusive:
		return fmt.Errorf("%w: %s", ErrExists, e.Path)
	case old.IsDir() && e.IsDir():
		return nil
	case old.IsDir():
		return fmt.Errorf("%w: %s", ErrIsDir, e.Path)
	case e.IsDir():
		return fmt.Errorf("%w: %s is a file", ErrExists, e.Path)
	}
	parent, _ := SplitPath(e.Path)
	var d *Entry
	if opts.NoParents {
		if d, err = t.get(parent); err != nil {
			return err
		}
		if !d.IsDir() {
			return fmt.Errorf("%w: %s", ErrNotDir, parent)
		}
	} else if d, err = t.mkdirs(parent); err != nil {
		return err
	}
	if old != nil {
		if err := t.dropUnused(old.Chunks, e.Chunks); err != nil {
			return err
		}
	}
	if err := t.put(e); err != nil {
		return err
	}
	if old != nil {
		return t.log(EventUpdate, old, e)
	}
	if err := t.log(EventCreate, nil, e); err != nil {
		return err
	}
	return t.namesChanged(d)
}

// Mkdir creates directory p (and its missing parents); an existing
// directory is fine unless exclusive.
func (f *Filer) Mkdir(ctx context.Context, p string, mode os.FileMode, exclusive bool) error {
	return f.CreateEntry(ctx, &Entry{Path: p, Mode: os.ModeDir | mode.Perm()}, CreateOptions{Exclusive: exclusive})
}

// UpdateEntry replaces the stored entry at e.Path with e (attributes,
// chunks). The entry must exist and keep its type. Chunks the old entry
// had and e has not are garbage-collected.
func (f *Filer) UpdateEntry(ctx context.Context, e *Entry) error {
	p, err := CleanPath(e.Path)
	if err != nil {
		return err
	}
	e.Path = p
	return f.update(ctx, func(t *txn) error {
		old, err := t.get(p)
		if err != nil {
			return err
		}
		return t.replace(old, e.Clone())
	})
}

// ModifyEntry applies fn to the entry at p as it is now and stores the
// result, in one transaction. Use it to change attributes of an entry that
// others may be writing: UpdateEntry stores what the caller read earlier,
// which would undo a write made in between (and, with its chunks,
// resurrect blobs already queued for deletion).
func (f *Filer) ModifyEntry(ctx context.Context, p string, fn func(e *Entry) error) error {
	p, err := CleanPath(p)
	if err != nil {
		return err
	}
	return f.update(ctx, func(t *txn) error {
		old, err := t.get(p)
		if err != nil {
			return err
		}
		ne := old.Clone()
		if ne.Xattrs == nil {
			ne.Xattrs = map[string][]byte{}
		}
		if err := fn(ne); err != nil {
			return err
		}
		ne.Path = p
		return t.replace(old, ne)
	})
}

// SetAttributes gives the entry at e.Path e's attributes (permission bits,
// owner, mtime, MIME type, user metadata, xattrs) and keeps its data
// (chunks, size, MD5, symlink target) as stored. With ifCtime set, the
// entry must still have that ctime, else ErrChanged and nothing changes:
// a caller that decided from what it read (filer.sync comparing two sites)
// does not overwrite a change made in between.
func (f *Filer) SetAttributes(ctx context.Context, e *Entry, ifCtime time.Time) error {
	return f.ModifyEntry(ctx, e.Path, func(ne *Entry) error {
		if !ifCtime.IsZero() && !ne.Ctime.Equal(ifCtime) {
			return fmt.Errorf("%w: %s", ErrChanged, ne.Path)
		}
		if ne.Mode.Type() != e.Mode.Type() {
			return fmt.Errorf("%w: %s: entry type cannot change", ErrInvalid, ne.Path)
		}
		ne.Mode = ne.Mode.Type() | e.Mode.Perm() | (e.Mode & (os.ModeSetuid | os.ModeSetgid | os.ModeSticky))
		ne.UID, ne.GID, ne.Mtime, ne.Mime = e.UID, e.GID, e.Mtime, e.Mime
		ne.Meta, ne.Xattrs = maps.Clone(e.Meta), maps.Clone(e.Xattrs)
		return nil
	})
}

// replace stores ne in place of old (same path), collecting old's chunks
// that ne does not keep.
func (t *txn) replace(old, ne *Entry) error {
	if old.Mode.Type() != ne.Mode.Type() {
		return fmt.Errorf("%w: %s: entry type cannot change", ErrInvalid, ne.Path)
	}
	ne.Ctime = t.now
	if ne.Crtime.IsZero() {
		ne.Crtime = old.Crtime
	}
	if err := t.dropUnused(old.Chunks, ne.Chunks); err != nil {
		return err
	}
	if err := t.put(ne); err != nil {
		return err
	}
	return t.log(EventUpdate, old, ne)
}

// DeleteEntry removes the entry at p. A non-empty directory needs
// recursive, else ErrNotEmpty. Every chunk of every removed file is
// garbage-collected; one delete event is logged for p.
func (f *Filer) DeleteEntry(ctx context.Context, p string, recursive bool) error {
	p, err := checkDelete(p)
	if err != nil {
		return err
	}
	return f.update(ctx, func(t *txn) error { return t.delete(p, recursive) })
}

// checkDelete cleans the path of a delete; the root cannot be deleted.
func checkDelete(p string) (string, error) {
	p, err := CleanPath(p)
	if err != nil {
		return "", err
	}
	if p == "/" {
		return "", fmt.Errorf("%w: the root cannot be deleted", ErrInvalid)
	}
	return p, nil
}

func (t *txn) delete(p string, recursive bool) error {
	old, err := t.get(p)
	if err != nil {
		return err
	}
	if old.IsDir() {
		if err := t.deleteTree(p, recursive); err != nil {
			return err
		}
	}
	if err := t.garbageChunks(old.Chunks); err != nil {
		return err
	}
	if err := t.tx.Delete(entryKey(p)); err != nil {
		return err
	}
	if err := t.log(EventDelete, old, nil); err != nil {
		return err
	}
	parent, _ := SplitPath(p)
	return t.namesChangedIn(parent)
}

// deleteTree removes everything below directory dir, queueing chunks.
func (t *txn) deleteTree(dir string, recursive bool) error {
	if !recursive {
		has, err := hasChildren(t.tx, dir)
		if err != nil {
			return err
		}
		if has {
			return fmt.Errorf("%w: %s", ErrNotEmpty, dir)
		}
		return nil
	}
	var keys [][]byte
	err := walkTree(t.tx, dir, func(k, v []byte) error {
		keys = append(keys, append([]byte(nil), k...))
		cs, err := entryChunks(v)
		if err != nil {
			return fmt.Errorf("%w (key %q)", err, k)
		}
		return t.garbageChunks(cs)
	})
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := t.tx.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// entryChunks decodes just enough of an entry to find its chunks.
func entryChunks(v []byte) ([]chunk.Chunk, error) {
	e, err := decodeEntry("?", v)
	if err != nil {
		return nil, err
	}
	return e.Chunks, nil
}

// dropUnused queues the chunks of old whose blob is not in keep.
func (t *txn) dropUnused(old, keep []chunk.Chunk) error {
	if len(old) == 0 {
		return nil
	}
	kept := make(map[string]bool, len(keep))
	for _, c := range keep {
		kept[c.FID] = true
	}
	var drop []chunk.Chunk
	for _, c := range old {
		if !kept[c.FID] {
			drop = append(drop, c)
		}
	}
	return t.garbageChunks(drop)
}
