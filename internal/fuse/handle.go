package fuse

import (
	"context"
	"errors"
	"io"
	"math"
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
	// direct: the kernel passes this descriptor's writes to the mount
	// without its page cache (FOPEN_DIRECT_IO, see directWrites); in is
	// the file's inode, whose cached pages such a write must not leave
	// stale for the file's other descriptors.
	direct bool
	in     *gofs.Inode
}

func newHandle(v *fsview.FS, h *fsview.Handle, in *gofs.Inode, flags uint32, syncClose bool) *handle {
	return &handle{v: v, h: h, syncClose: syncClose, direct: directWrites(flags), in: in}
}

// directWrites says whether a descriptor opened with flags bypasses the
// kernel's page cache: a write-only one that does not append. Such a
// descriptor can neither read nor mmap, so the pages a write-through write
// fills would serve only other descriptors of the file; filling them (a
// page allocation, a cgroup charge and a copy per 4 KiB) was a third of
// cp's CPU when it copied 1 MiB files in, on the path every write waits on.
// The kernel drops the cached pages of the range before such a write; the
// mount drops them again after it when the file is open elsewhere here
// (Write), so that a read racing the write cannot leave the old bytes
// cached. Appending descriptors keep the page cache: a log and the tail -f
// reading it are the common case of a file read while it is written.
func directWrites(flags uint32) bool {
	return flags&syscall.O_ACCMODE == syscall.O_WRONLY && flags&syscall.O_APPEND == 0
}

// openFlags is the FUSE open reply's flags for h.
func (h *handle) openFlags() uint32 {
	if h.direct {
		return gofuse.FOPEN_DIRECT_IO
	}
	return 0
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
	if h.direct && n > 0 && h.h.Shared() {
		// Another descriptor may have read the range into the page cache
		// while this write was on its way; drop it before the writer
		// returns. Errors only mean nothing was cached.
		_ = h.in.NotifyContent(off, int64(n))
	}
	if err != nil {
		return uint32(n), h.v.Errno(err)
	}
	return uint32(n), 0
}

// fallocate(2) modes (linux/falloc.h).
const (
	fallocKeepSize  = 0x01
	fallocPunchHole = 0x02
	fallocZeroRange = 0x10
)

// Allocate is fallocate(2). A cluster reserves no space ahead of writes,
// so preallocation only sets the size (mode 0; with FALLOC_FL_KEEP_SIZE it
// does nothing); a punched hole or a zeroed range reads as zeros because
// zeros are written there (the chunks keep no holes of their own). Other
// modes (collapse, insert) are EOPNOTSUPP.
func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	ctx, done := uninterrupted(ctx)
	defer done()
	switch mode {
	case 0, fallocKeepSize, fallocPunchHole | fallocKeepSize, fallocZeroRange, fallocZeroRange | fallocKeepSize:
	default:
		return syscall.EOPNOTSUPP
	}
	end := off + size
	if size == 0 || end < off || end > math.MaxInt64 {
		return syscall.EINVAL // the kernel checks too; a wrapped range never reaches the view
	}
	a, err := h.h.Attr(ctx)
	if err != nil {
		return h.v.Errno(err)
	}
	if mode&(fallocPunchHole|fallocZeroRange) != 0 {
		if err := h.writeZeros(ctx, int64(off), min(int64(end), a.Size)); err != nil {
			return h.v.Errno(err)
		}
	}
	if mode&fallocKeepSize == 0 && int64(end) > a.Size {
		return h.v.Errno(h.h.Truncate(ctx, int64(end)))
	}
	return 0
}

// writeZeros writes zeros over [off, end), a block at a time.
func (h *handle) writeZeros(ctx context.Context, off, end int64) error {
	zeros := make([]byte, min(max(end-off, 0), 1<<20))
	for off < end {
		n, err := h.h.WriteAt(ctx, zeros[:min(int64(len(zeros)), end-off)], off)
		if err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
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
