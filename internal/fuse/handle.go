package fuse

import (
	"context"
	"errors"
	"io"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/kelpfs/kelp/internal/fsview"
)

// handle is one open file of the mount.
type handle struct {
	v *fsview.FS // for its Errno
	h *fsview.Handle
	// syncClose: close(2) commits (Options.SyncClose); otherwise it only
	// starts the uploads and the last release commits in the background.
	syncClose bool
}

var (
	_ gofs.FileReader   = (*handle)(nil)
	_ gofs.FileWriter   = (*handle)(nil)
	_ gofs.FileFlusher  = (*handle)(nil)
	_ gofs.FileFsyncer  = (*handle)(nil)
	_ gofs.FileReleaser = (*handle)(nil)
)

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (gofuse.ReadResult, syscall.Errno) {
	ctx, done := uninterrupted(ctx)
	defer done()
	data, release, err := h.h.ReadShared(ctx, dest, off)
	if err != nil && !errors.Is(err, io.EOF) {
		release()
		return nil, h.v.Errno(err)
	}
	return &sharedResult{data: data, release: release}, 0
}

// sharedResult is a READ reply sent from the view's read-ahead buffer
// (fsview.Handle.ReadShared), given back once the reply is written: the
// library calls Done after writing it, or when it drops it (an error
// status). Slices makes the library write it with writev as it is, on
// every path, never after Done.
type sharedResult struct {
	data    []byte
	release func()
}

func (r *sharedResult) Bytes([]byte) ([]byte, gofuse.Status) { return r.data, gofuse.OK }
func (r *sharedResult) Size() int                            { return len(r.data) }
func (r *sharedResult) Slices() ([][]byte, gofuse.Status)    { return [][]byte{r.data}, gofuse.OK }
func (r *sharedResult) Done() {
	if r.release != nil {
		r.release()
		r.release = nil
	}
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	ctx, done := uninterrupted(ctx)
	defer done()
	n, err := h.h.WriteAt(ctx, data, off)
	if err != nil {
		return uint32(n), h.v.Errno(err)
	}
	return uint32(n), 0
}

// Flush runs at every close(2) of a descriptor. close(2) is no durability
// point in POSIX (fsync is): unless syncClose, it starts the uploads of
// what is buffered and returns; the file is committed after its last
// release, in the background, while this mount reads it as written.
func (h *handle) Flush(ctx context.Context) syscall.Errno {
	ctx, done := uninterrupted(ctx)
	defer done()
	if h.syncClose {
		return h.v.Errno(h.h.Flush(ctx))
	}
	return h.v.Errno(h.h.StartFlush(ctx))
}

func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	ctx, done := uninterrupted(ctx)
	defer done()
	return h.v.Errno(h.h.Fsync(ctx))
}

func (h *handle) Release(ctx context.Context) syscall.Errno {
	ctx, done := uninterrupted(ctx)
	defer done()
	if h.syncClose {
		return h.v.Errno(h.h.Release(ctx))
	}
	h.h.ReleaseLater()
	return 0
}
