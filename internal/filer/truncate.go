package filer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/kelpfs/kelp/internal/chunk"
)

// Truncate sets the size of the file at p, as truncate(2) does. Growing
// leaves a hole that reads as zeros. Shrinking drops the chunks past the new
// end (collected in the background) and replaces those that straddle it by
// one new chunk holding the bytes that stay visible, so that growing the file
// again later reads zeros there, never the cut bytes.
func (f *Filer) Truncate(ctx context.Context, p string, size int64) (*Entry, error) {
	if size < 0 {
		return nil, fmt.Errorf("%w: negative size %d", ErrInvalid, size)
	}
	p, err := f.precheckFile(ctx, p)
	if err != nil {
		return nil, err
	}
	// A concurrent writer may change the file while the straddling bytes
	// are copied; the commit checks that it did not, and tries again.
	for range 8 {
		e, err := f.FindEntry(ctx, p)
		if err != nil {
			return nil, err
		}
		if e.IsDir() {
			return nil, fmt.Errorf("%w: %s", ErrIsDir, p)
		}
		final, err := f.truncateOnce(ctx, e, size)
		if !errors.Is(err, errStaleEntry) {
			return final, err
		}
	}
	return nil, fmt.Errorf("filer: truncate %s: the file kept changing", p)
}

var errStaleEntry = errors.New("filer: entry changed")

func (f *Filer) truncateOnce(ctx context.Context, e *Entry, size int64) (*Entry, error) {
	resolved, err := chunk.Resolve(ctx, f.blobs, e.Chunks, 0, -1)
	if err != nil {
		return nil, fmt.Errorf("filer: truncate %s: %w", e.Path, err)
	}
	var keep, drop []chunk.Chunk
	cut := size // the start of the straddling region, if any
	for _, c := range resolved {
		switch {
		case c.End() <= size:
			keep = append(keep, c)
		case c.Offset < size:
			cut = min(cut, c.Offset)
			drop = append(drop, c)
		default:
			drop = append(drop, c)
		}
	}
	var tail []chunk.Chunk
	if cut < size && cut < e.Size {
		// The straddling chunks may shadow or be shadowed by others: copy
		// what a reader sees in [cut, min(size, old size)).
		r := chunk.NewReader(ctx, f.blobs, resolved, e.Size)
		defer r.Close()
		if _, err := r.Seek(cut, io.SeekStart); err != nil {
			return nil, err
		}
		res, err := f.split(ctx, io.LimitReader(r, min(size, e.Size)-cut), cut, min(size, e.Size)-cut)
		if err != nil {
			return nil, err
		}
		tail = res.Chunks
	}
	// Manifests are dropped as plain blobs: the chunks they list that stay
	// are now listed in the entry itself.
	for _, c := range e.Chunks {
		if c.Manifest {
			drop = append(drop, chunk.Chunk{FID: c.FID})
		}
	}
	var final *Entry
	err = f.update(ctx, func(t *txn) error {
		cur, err := t.get(e.Path)
		if err != nil {
			return err
		}
		if !slices.EqualFunc(cur.Chunks, e.Chunks, chunk.Equal) || cur.Size != e.Size {
			return errStaleEntry
		}
		ne := cur.Clone()
		ne.Chunks = append(slices.Clone(keep), tail...)
		ne.Size = size
		if size != cur.Size {
			ne.MD5 = nil // the content changed; the ETag follows the chunks
		}
		ne.Mtime, ne.Ctime = t.now, t.now
		if err := t.garbageChunks(drop); err != nil {
			return err
		}
		if err := t.put(ne); err != nil {
			return err
		}
		final = ne
		return t.log(EventUpdate, cur, ne)
	})
	if err != nil {
		f.discard(ctx, tail)
		return nil, err
	}
	return final, nil
}
