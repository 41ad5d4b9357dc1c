package filer

import (
	"context"
	"fmt"
)

// Batch is a set of namespace operations committed in one transaction: all
// of them or none, and no reader sees a state between them. Each behaves as
// the Filer method of the same name.
type Batch interface {
	Find(p string) (*Entry, error)
	List(dir string, opts ListOptions) ([]*Entry, bool, error)
	Create(e *Entry, opts CreateOptions) error
	Rename(from, to string) error
	Delete(p string, recursive bool) error
	// Update replaces the existing entry at e.Path as UpdateEntry does
	// (same type; chunks it drops are garbage-collected).
	Update(e *Entry) error
}

// Atomically runs fn in one transaction. The store may run fn again after
// a conflict, so fn must not act outside the Batch.
func (f *Filer) Atomically(ctx context.Context, fn func(Batch) error) error {
	return f.update(ctx, func(t *txn) error { return fn(batch{t}) })
}

type batch struct{ t *txn }

func (b batch) Find(p string) (*Entry, error) {
	p, err := CleanPath(p)
	if err != nil {
		return nil, err
	}
	return b.t.get(p)
}

func (b batch) List(dir string, opts ListOptions) ([]*Entry, bool, error) {
	dir, err := CleanPath(dir)
	if err != nil {
		return nil, false, err
	}
	return listEntries(b.t.tx, dir, opts)
}

func (b batch) Create(e *Entry, opts CreateOptions) error {
	p, err := CleanPath(e.Path)
	if err != nil {
		return err
	}
	if p == "/" {
		return fmt.Errorf("%w: /", ErrExists)
	}
	c := e.Clone()
	c.Path = p
	return b.t.create(c, opts)
}

func (b batch) Rename(from, to string) error {
	from, to, err := checkRename(from, to)
	if err != nil || from == to {
		return err
	}
	return b.t.rename(from, to)
}

func (b batch) Delete(p string, recursive bool) error {
	p, err := checkDelete(p)
	if err != nil {
		return err
	}
	return b.t.delete(p, recursive)
}

func (b batch) Update(e *Entry) error {
	p, err := CleanPath(e.Path)
	if err != nil {
		return err
	}
	old, err := b.t.get(p)
	if err != nil {
		return err
	}
	c := e.Clone()
	c.Path = p
	return b.t.replace(old, c)
}
