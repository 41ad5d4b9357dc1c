package filer

import (
	"context"
	"errors"
	"fmt"
)

// Rename moves the entry at from, with everything below it when it is a
// directory, to to, in one store transaction: a reader sees the old tree or
// the new one. Missing parents of to are created. An existing file at to
// is replaced by a file (its chunks collected); an existing empty directory
// by a directory; anything else at to is ErrExists, ErrIsDir or ErrNotDir.
// Moving a directory into itself is ErrInvalid.
func (f *Filer) Rename(ctx context.Context, from, to string) error {
	from, to, err := checkRename(from, to)
	if err != nil {
		return err
	}
	if from == to {
		_, err := f.FindEntry(ctx, from)
		return err
	}
	return f.update(ctx, func(t *txn) error { return t.rename(from, to) })
}

// checkRename cleans the paths of a rename and refuses impossible ones.
func checkRename(from, to string) (string, string, error) {
	from, err := CleanPath(from)
	if err != nil {
		return "", "", err
	}
	to, err = CleanPath(to)
	if err != nil {
		return "", "", err
	}
	if from == "/" || to == "/" {
		return "", "", fmt.Errorf("%w: cannot rename the root", ErrInvalid)
	}
	if IsAncestor(from, to) {
		return "", "", fmt.Errorf("%w: cannot move %s into itself (%s)", ErrInvalid, from, to)
	}
	return from, to, nil
}

func (t *txn) rename(from, to string) error {
	src, err := t.get(from)
	if err != nil {
		return err
	}
	dst, err := t.get(to)
	switch {
	case errors.Is(err, ErrNotFound):
		dst = nil
	case err != nil:
		return err
	}
	if dst != nil {
		if err := t.replaceTarget(src, dst); err != nil {
			return err
		}
	}
	parent, _ := SplitPath(to)
	toDir, err := t.mkdirs(parent)
	if err != nil {
		return err
	}
	moved := src.Clone()
	moved.Path = to
	moved.Ctime = t.now
	if src.IsDir() {
		if held, err := t.q.holdsQuota(from); err != nil {
			return err
		} else if held {
			return fmt.Errorf("%w: %s is or holds a quota directory and cannot be renamed", ErrInvalid, from)
		}
		if err := t.moveTree(from, to); err != nil {
			return err
		}
	}
	if err := t.tx.Delete(entryKey(from)); err != nil {
		return err
	}
	if err := t.put(moved); err != nil {
		return err
	}
	if err := t.log(EventRename, src, moved); err != nil {
		return err
	}
	if err := t.namesChanged(toDir); err != nil {
		return err
	}
	fromParent, _ := SplitPath(from)
	return t.namesChangedIn(fromParent) // read again: it may be toDir, just rewritten
}

// replaceTarget checks that src may replace dst and removes dst, logging
// its deletion.
func (t *txn) replaceTarget(src, dst *Entry) error {
	switch {
	case src.IsDir() && !dst.IsDir():
		return fmt.Errorf("%w: %s", ErrNotDir, dst.Path)
	case !src.IsDir() && dst.IsDir():
		return fmt.Errorf("%w: %s", ErrIsDir, dst.Path)
	case dst.IsDir():
		has, err := hasChildren(t.tx, dst.Path)
		if err != nil {
			return err
		}
		if has {
			return fmt.Errorf("%w: %s", ErrNotEmpty, dst.Path)
		}
	}
	if err := t.garbageChunks(dst.Chunks); err != nil {
		return err
	}
	if err := t.tx.Delete(entryKey(dst.Path)); err != nil {
		return err
	}
	return t.log(EventDelete, dst, nil)
}

// moveTree rewrites the keys of everything below directory from to lie
// below to. Values do not hold paths, so they move unchanged.
func (t *txn) moveTree(from, to string) error {
	type kv struct{ k, v []byte }
	var all []kv
	err := walkTree(t.tx, from, func(k, v []byte) error {
		all = append(all, kv{append([]byte(nil), k...), append([]byte(nil), v...)})
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range all {
		old, err := pathOfKey(p.k)
		if err != nil {
			return err
		}
		if err := t.tx.Delete(p.k); err != nil {
			return err
		}
		if err := t.tx.Put(entryKey(to+old[len(from):]), p.v); err != nil {
			return err
		}
	}
	return nil
}
