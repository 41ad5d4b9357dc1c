package filer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/crtime"
)

// WriteOptions describe a file being written.
type WriteOptions struct {
	Mode     os.FileMode // permission bits; 0 means 0644 (WriteAt/Append: keep the file's)
	UID, GID uint32
	Mime     string            // "" keeps the file's (WriteAt/Append) or leaves it unset
	Meta     map[string]string // user metadata; nil keeps the file's on WriteAt/Append
	SizeHint int64             // length of r when known, to size buffers; <= 0 unknown
	// Exclusive makes WriteFile fail with ErrExists when the path exists.
	Exclusive bool
	// IfMatch makes WriteFile replace the file only while it still has
	// this ETag ("*": while some file is there), checked in the commit's
	// transaction, else ErrChanged and nothing changes: a compare-and-swap
	// for read-modify-write editors of one file.
	IfMatch string
}

func (f *Filer) split(ctx context.Context, r io.Reader, base int64, hint int64) (chunk.SplitResult, error) {
	res, err := chunk.Split(ctx, f.blobs, r, base, chunk.SplitOptions{
		ChunkSize: f.cfg.ChunkSize, Concurrency: f.cfg.Concurrency, SizeHint: hint, Now: f.now,
		Encrypt: f.cfg.EncryptData,
	})
	if err != nil {
		f.discard(ctx, res.Chunks)
		return res, fmt.Errorf("filer: write: %w", err)
	}
	return res, nil
}

// precheckFile fails early, before any upload, when p is a directory.
func (f *Filer) precheckFile(ctx context.Context, p string) (string, error) {
	p, err := CleanPath(p)
	if err != nil {
		return "", err
	}
	if p == "/" {
		return "", fmt.Errorf("%w: /", ErrIsDir)
	}
	e, err := f.FindEntry(ctx, p)
	if err == nil && e.IsDir() {
		return "", fmt.Errorf("%w: %s", ErrIsDir, p)
	}
	return p, nil
}

// WriteFile stores the content of r as the file at p, replacing any file
// there (its chunks are collected). The content is cut into chunks uploaded
// in parallel with bounded memory; its MD5 becomes the ETag.
func (f *Filer) WriteFile(ctx context.Context, p string, r io.Reader, opts WriteOptions) (*Entry, error) {
	p, err := f.precheckFile(ctx, p)
	if err != nil {
		return nil, err
	}
	if err := f.precheckQuota(ctx, p, opts.SizeHint); err != nil {
		return nil, err
	}
	res, err := f.split(ctx, r, 0, opts.SizeHint)
	if err != nil {
		return nil, err
	}
	cs, err := chunk.Pack(ctx, f.blobs, res.Chunks, f.cfg.ManifestThreshold, f.cfg.ManifestBatch)
	if err != nil {
		f.discard(ctx, res.Chunks)
		return nil, fmt.Errorf("filer: write: %w", err)
	}
	if len(cs) != len(res.Chunks) {
		// The packed chunks live on inside manifests; only the manifests
		// would need discarding on failure, and all of res if packing split.
		res.Chunks = append(res.Chunks, manifestsOf(cs)...)
	}
	mode := opts.Mode.Perm()
	if mode == 0 {
		mode = 0o644
	}
	e := &Entry{
		Path: p, Mode: mode, UID: opts.UID, GID: opts.GID, Mime: opts.Mime,
		Size: res.Size, MD5: res.MD5, Meta: maps.Clone(opts.Meta), Chunks: cs,
	}
	var final *Entry
	err = f.update(ctx, func(t *txn) error {
		if opts.IfMatch != "" {
			old, err := t.get(p)
			switch {
			case errors.Is(err, ErrNotFound):
				return fmt.Errorf("%w: %s is gone (If-Match %q)", ErrChanged, p, opts.IfMatch)
			case err != nil:
				return err
			case opts.IfMatch != "*" && old.ETag() != opts.IfMatch:
				return fmt.Errorf("%w: %s has ETag %q, not %q (If-Match)", ErrChanged, p, old.ETag(), opts.IfMatch)
			}
		}
		final = e.Clone()
		final.Mtime = t.now
		return t.create(final, CreateOptions{Exclusive: opts.Exclusive})
	})
	if err != nil {
		f.discard(ctx, res.Chunks)
		return nil, err
	}
	return final, nil
}

func manifestsOf(cs []chunk.Chunk) []chunk.Chunk {
	var out []chunk.Chunk
	for _, c := range cs {
		if c.Manifest {
			out = append(out, c)
		}
	}
	return out
}

// WriteAt writes the content of r at offset off of the file at p, creating
// the file (sparse up to off) when missing. Newer bytes shadow older ones;
// chunks left with no visible byte are collected.
func (f *Filer) WriteAt(ctx context.Context, p string, off int64, r io.Reader, opts WriteOptions) (*Entry, error) {
	if off < 0 {
		return nil, fmt.Errorf("%w: negative offset", ErrInvalid)
	}
	return f.patch(ctx, p, r, opts, func(size int64) int64 { return off })
}

// Append adds the content of r at the end of the file at p (created when
// missing). The end is read in the committing transaction, so concurrent
// appends never overwrite each other.
func (f *Filer) Append(ctx context.Context, p string, r io.Reader, opts WriteOptions) (*Entry, error) {
	return f.patch(ctx, p, r, opts, func(size int64) int64 { return size })
}

// patch uploads r as chunks based at 0 and, in one transaction, places
// them at where(current size) in the file.
func (f *Filer) patch(ctx context.Context, p string, r io.Reader, opts WriteOptions, where func(size int64) int64) (*Entry, error) {
	p, err := f.precheckFile(ctx, p)
	if err != nil {
		return nil, err
	}
	res, err := f.split(ctx, r, 0, opts.SizeHint)
	if err != nil {
		return nil, err
	}
	var final *Entry
	err = f.update(ctx, func(t *txn) error {
		old, err := t.get(p)
		created := errors.Is(err, ErrNotFound)
		switch {
		case created:
			mode := opts.Mode.Perm()
			if mode == 0 {
				mode = 0o644
			}
			old = &Entry{Path: p, Mode: mode, UID: opts.UID, GID: opts.GID, Crtime: crtime.Unique(t.now)}
		case err != nil:
			return err
		case old.IsDir():
			return fmt.Errorf("%w: %s", ErrIsDir, p)
		}
		e := old.Clone()
		off := where(e.Size)
		if created || e.Size == 0 && off == 0 {
			e.MD5 = res.MD5 // the whole content is this write
		} else if res.Size > 0 {
			e.MD5 = nil
		}
		for _, c := range res.Chunks {
			c.Offset += off
			e.Chunks = append(e.Chunks, c)
		}
		if res.Size > 0 {
			e.Size = max(e.Size, off+res.Size)
		}
		if hidden := chunk.Hidden(e.Chunks); len(hidden) > 0 {
			gone := make(map[string]bool, len(hidden))
			for _, c := range hidden {
				gone[c.FID] = true
			}
			e.Chunks = slices.DeleteFunc(e.Chunks, func(c chunk.Chunk) bool { return gone[c.FID] })
			if err := t.garbageChunks(hidden); err != nil {
				return err
			}
		}
		if opts.Mime != "" {
			e.Mime = opts.Mime
		}
		if opts.Meta != nil {
			e.Meta = maps.Clone(opts.Meta)
		}
		if opts.Mode != 0 {
			e.Mode = e.Mode.Type() | opts.Mode.Perm()
		}
		e.Mtime, e.Ctime = t.now, t.now
		var dir *Entry
		if created {
			parent, _ := SplitPath(p)
			if dir, err = t.mkdirs(parent); err != nil {
				return err
			}
		}
		if err := t.put(e); err != nil {
			return err
		}
		final = e
		if !created {
			return t.log(EventUpdate, old, e)
		}
		if err := t.log(EventCreate, nil, e); err != nil {
			return err
		}
		return t.namesChanged(dir)
	})
	if err != nil {
		f.discard(ctx, res.Chunks)
		return nil, err
	}
	if plainChunks(final.Chunks) > f.cfg.ManifestThreshold {
		if err := f.repack(ctx, final); err != nil {
			f.log.Warn("filer: packing chunks into manifests", "path", p, "err", err)
		}
	}
	return final, nil
}

func plainChunks(cs []chunk.Chunk) int {
	n := 0
	for _, c := range cs {
		if !c.Manifest {
			n++
		}
	}
	return n
}

// repack moves runs of e's chunks into manifests, if e is still what is
// stored (else a concurrent writer won and the manifests are dropped).
func (f *Filer) repack(ctx context.Context, e *Entry) error {
	packed, err := chunk.Pack(ctx, f.blobs, e.Chunks, f.cfg.ManifestThreshold, f.cfg.ManifestBatch)
	if err != nil || len(packed) == len(e.Chunks) {
		return err
	}
	var fresh []chunk.Chunk
	had := make(map[string]bool, len(e.Chunks))
	for _, c := range e.Chunks {
		had[c.FID] = true
	}
	for _, c := range packed {
		if !had[c.FID] {
			fresh = append(fresh, c)
		}
	}
	stale := errors.New("entry changed")
	err = f.update(ctx, func(t *txn) error {
		cur, err := t.get(e.Path)
		if err != nil {
			return err
		}
		if !slices.EqualFunc(cur.Chunks, e.Chunks, chunk.Equal) {
			return stale
		}
		ne := cur.Clone()
		ne.Chunks = packed
		if err := t.put(ne); err != nil {
			return err
		}
		return t.log(EventUpdate, cur, ne)
	})
	if err != nil {
		// Only the new manifest blobs are ours to drop; their chunks are
		// still referenced by the entry.
		f.discardManifestBlobs(ctx, fresh)
		if errors.Is(err, stale) || errors.Is(err, ErrNotFound) {
			return nil
		}
	}
	return err
}

// discardManifestBlobs queues manifests as plain blobs, so that their
// chunks (still in use) are not collected with them.
func (f *Filer) discardManifestBlobs(ctx context.Context, ms []chunk.Chunk) {
	plain := make([]chunk.Chunk, len(ms))
	for i, m := range ms {
		plain[i] = chunk.Chunk{FID: m.FID}
	}
	f.discard(ctx, plain)
}

// Open returns a reader of file e's content (manifests are resolved
// first). ctx bounds the reader's blob reads.
func (f *Filer) Open(ctx context.Context, e *Entry) (*chunk.Reader, error) {
	if e.IsDir() {
		return nil, fmt.Errorf("%w: %s", ErrIsDir, e.Path)
	}
	cs, err := chunk.Resolve(ctx, f.blobs, e.Chunks, 0, -1)
	if err != nil {
		return nil, fmt.Errorf("filer: open %s: %w", e.Path, err)
	}
	return chunk.NewReader(ctx, f.blobs, cs, e.Size), nil
}
