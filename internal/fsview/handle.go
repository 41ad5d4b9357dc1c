package fsview

import (
	"context"
	"os"
	"syscall"
	"time"

	"github.com/kelpfs/kelp/internal/crtime"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// Handle is one open(2) of a file.
type Handle struct {
	fs    *FS
	f     *file
	flags int
	name  string // view path at open, for Attr
	node  *node  // as resolved at open: names and link group do not change while open
}

// Open opens file p with open(2) flags (O_TRUNC and O_APPEND honoured).
func (fs *FS) Open(ctx context.Context, p string, flags int) (*Handle, error) {
	n, gen, err := fs.resolveFile(ctx, p)
	if err != nil {
		return nil, err
	}
	return fs.openNode(ctx, n, p, flags, gen)
}

// resolveFile resolves p, which must not be a directory, for an open; gen
// is forgetGen's before the resolve (see openNode).
func (fs *FS) resolveFile(ctx context.Context, p string) (*node, uint64, error) {
	gen := fs.forgetGen()
	n, err := fs.resolve(ctx, p)
	if err != nil {
		return nil, 0, err
	}
	if n.isDir() {
		return nil, 0, errnof(syscall.EISDIR, "%s", p)
	}
	return n, gen, nil
}

// openNode opens n, resolved after forgetGen returned gen.
func (fs *FS) openNode(ctx context.Context, n *node, p string, flags int, gen uint64) (*Handle, error) {
	known := n.content
	if n.cached {
		// Close-to-open consistency, as NFS gives: a file not open here is
		// opened as the filer has it now, not as the cache last saw it (a
		// change made through another mount whose event is still on its
		// way, its old chunks perhaps collected already).
		known = nil
	}
	f, err := fs.acquireEntry(ctx, n.contentPath(), known, gen)
	if err != nil {
		return nil, err
	}
	h := &Handle{fs: fs, f: f, flags: flags, name: p, node: n}
	if flags&syscall.O_TRUNC != 0 && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		if err := f.truncate(ctx, 0); err != nil {
			fs.release(ctx, f)
			return nil, err
		}
	}
	return h, nil
}

// Create makes file p and opens it; with O_EXCL an existing p is EEXIST,
// without it an existing file is opened.
func (fs *FS) Create(ctx context.Context, p string, flags int, perm os.FileMode, uid, gid uint32) (*Handle, error) {
	if err := checkName(p); err != nil {
		return nil, err
	}
	gid, perm = fs.inherit(ctx, p, gid, perm)
	e := &filerpb.Entry{Path: fs.full(p), Mode: uint32(perm & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)),
		Uid: uid, Gid: gid, MtimeNs: crtime.Unique(time.Now()).UnixNano()}
	e.CrtimeNs = e.MtimeNs // known here, so the inode number is too (inoOfEntry)
	gen := fs.forgetGen()
	if fs.cfg.AsyncCreate && fs.cache.absent(e.Path) {
		// Known absent: answer now, the filer makes the entry meanwhile
		// (Config.AsyncCreate). The file's first commit waits for it.
		e.CtimeNs = e.MtimeNs
		c := &asyncCreate{done: make(chan struct{})}
		if f := fs.acquireNew(e, c); f != nil {
			fs.createAsync(c, cloneEntry(e))
			return &Handle{fs: fs, f: f, flags: flags, name: p, node: &node{name: e, content: e}}, nil
		}
	}
	if err := fs.create(deferred(ctx), e, true); err != nil {
		if Errno(err) == syscall.EEXIST && flags&syscall.O_EXCL == 0 {
			return fs.Open(ctx, p, flags)
		}
		return nil, err
	}
	// The entry just created is the one to open: no need to look it up.
	e.CtimeNs = e.MtimeNs
	return fs.openNode(ctx, &node{name: e, content: e}, p, flags&^syscall.O_TRUNC, gen)
}

// ReadAt reads from the file at off; a read at or past the end is io.EOF.
func (h *Handle) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	return h.f.read(ctx, p, off)
}

// ReadShared is ReadAt that may answer with a slice of the file's
// read-ahead buffer instead of copying into p (which it uses otherwise):
// the bytes are those ReadAt would give. The slice is valid until release
// is called, which must be done exactly once, when the caller no longer
// uses it (the FUSE mount: once the reply is written).
func (h *Handle) ReadShared(ctx context.Context, p []byte, off int64) (data []byte, release func(), err error) {
	data, b, err := h.f.readShared(ctx, p, off)
	if b == nil {
		return data, func() {}, err
	}
	return data, b.release, err
}

// WriteAt writes p at off (at the end with O_APPEND) into the buffer.
func (h *Handle) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	if h.flags&syscall.O_ACCMODE == syscall.O_RDONLY {
		return 0, syscall.EBADF
	}
	if h.flags&syscall.O_APPEND != 0 {
		off, _ = h.f.sizeAndMtime()
	}
	return h.f.write(ctx, p, off)
}

// Shared reports whether the file is open through another handle of this
// view too.
func (h *Handle) Shared() bool {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	return h.f.refs > 1
}

// Flush commits the buffered writes (close(2) and fsync(2) call it).
func (h *Handle) Flush(ctx context.Context) error { return h.f.flush(ctx) }

// Fsync commits the buffered writes and returns once they, the file's
// entry and every change before them are durable in the filer's store
// (fsync(2), fdatasync(2)): after a deferred create or background commit
// the flush may have nothing left to commit, so the filer is asked to Sync.
func (h *Handle) Fsync(ctx context.Context) error {
	if err := h.f.flush(ctx); err != nil {
		return err
	}
	return h.fs.syncFiler(ctx)
}

// Release closes the handle; the last one of a file commits and forgets it.
func (h *Handle) Release(ctx context.Context) error { return h.fs.release(ctx, h.f) }

// StartFlush starts uploading what is buffered, without waiting or
// committing (close(2) of a mount that commits in the background).
func (h *Handle) StartFlush(ctx context.Context) error { return h.f.startFlush(ctx) }

// ReleaseLater closes the handle; after the last one of a file, the file is
// committed in the background (Sync, or Flush of a handle opened later,
// waits for it). A failed background commit is logged, and returned by the
// next Flush of the file if it is opened again before it is forgotten.
func (h *Handle) ReleaseLater() { h.fs.releaseLater(h.f) }

// Attr is the file's attributes as seen through the handle.
func (h *Handle) Attr(ctx context.Context) (Attr, error) {
	n := *h.node
	n.content = h.f.entrySnapshot()
	if n.linkID == "" {
		n.name = n.content
	}
	return h.fs.attrOf(&n, h.f), nil
}

// Truncate sets the file's size (ftruncate(2)).
func (h *Handle) Truncate(ctx context.Context, size int64) error { return h.f.truncate(ctx, size) }
