package fuse

import (
	"context"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/kelpfs/kelp/internal/fsview"
)

// node is one inode of the mount; its path in the view is its place in
// go-fuse's tree, so a rename moves it without any bookkeeping here.
type node struct {
	gofs.Inode
	v         *fsview.FS
	readOnly  bool
	syncClose bool
	links     *linkTable
	// negTTL is how long the kernel may keep a name the view knows to be
	// absent (fsview.IsCachedAbsence).
	negTTL time.Duration
	// attrTTL is how long the kernel keeps attributes (Options.CacheTimeout).
	attrTTL time.Duration
	// linkID is set once the file has hard links: its content and
	// attributes are then addressed by the link group, not by a path, since
	// the kernel's one inode has several names and any may be renamed over.
	linkID atomic.Pointer[string]
}

var (
	_ gofs.NodeLookuper      = (*node)(nil)
	_ gofs.NodeGetattrer     = (*node)(nil)
	_ gofs.NodeSetattrer     = (*node)(nil)
	_ gofs.NodeReaddirer     = (*node)(nil)
	_ gofs.NodeMkdirer       = (*node)(nil)
	_ gofs.NodeRmdirer       = (*node)(nil)
	_ gofs.NodeUnlinker      = (*node)(nil)
	_ gofs.NodeRenamer       = (*node)(nil)
	_ gofs.NodeCreater       = (*node)(nil)
	_ gofs.NodeOpener        = (*node)(nil)
	_ gofs.NodeSymlinker     = (*node)(nil)
	_ gofs.NodeReadlinker    = (*node)(nil)
	_ gofs.NodeLinker        = (*node)(nil)
	_ gofs.NodeGetxattrer    = (*node)(nil)
	_ gofs.NodeSetxattrer    = (*node)(nil)
	_ gofs.NodeListxattrer   = (*node)(nil)
	_ gofs.NodeRemovexattrer = (*node)(nil)
	_ gofs.NodeStatfser      = (*node)(nil)
)

// linkTable maps each hard-link group to its one kernel inode, so that all
// names of a linked file are one inode to the kernel (one size, one page
// cache), whichever name was looked up first.
type linkTable struct {
	mu sync.Mutex
	m  map[string]*gofs.Inode
}

func (t *linkTable) get(id string) *gofs.Inode {
	t.mu.Lock()
	defer t.mu.Unlock()
	in := t.m[id]
	if in != nil && in.Forgotten() {
		delete(t.m, id)
		return nil
	}
	return in
}

func (t *linkTable) set(id string, in *gofs.Inode) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.m[id] = in
}

func (n *node) path() string { return "/" + n.Path(nil) }

// self is the view path of this inode's own content and attributes.
func (n *node) self() string {
	if id := n.linkID.Load(); id != nil {
		return fsview.LinkRef(*id)
	}
	return n.path()
}

func (n *node) setLink(id string) {
	if id != "" {
		n.linkID.Store(&id)
	}
}

func (n *node) child(name string) string { return path.Join(n.path(), name) }

// loopsBack reports whether ino is the inode number of n or of one of its
// ancestors. Directories that a filer before internal/crtime created in
// one transaction (a/ and a/b/ for a PUT of a/b/c) share a creation time,
// and so an inode number: the kernel would take a/b for its own ancestor
// (ELOOP), and the node tree would loop (path() never ending).
func (n *node) loopsBack(ino uint64) bool {
	in := n.EmbeddedInode()
	for depth := 0; in != nil && depth < maxDepth; depth++ {
		if in.StableAttr().Ino == ino {
			return true
		}
		_, in = in.Parent()
	}
	return false
}

// maxDepth bounds the walk up the node tree.
const maxDepth = 4096

func (n *node) newChild(ctx context.Context, a fsview.Attr, out *gofuse.EntryOut, name string) *gofs.Inode {
	if a.Mode.IsDir() && n.loopsBack(a.Ino) {
		a.Ino = fsview.PathIno(n.child(name)) // stable while it is not renamed
	}
	fillAttr(&out.Attr, a)
	if a.LinkID != "" {
		if in := n.links.get(a.LinkID); in != nil {
			out.Attr.Ino = in.StableAttr().Ino
			return in
		}
	}
	ch := &node{v: n.v, readOnly: n.readOnly, syncClose: n.syncClose, links: n.links, negTTL: n.negTTL, attrTTL: n.attrTTL}
	ch.setLink(a.LinkID)
	in := n.NewInode(ctx, ch, gofs.StableAttr{Mode: unixMode(a.Mode) & syscall.S_IFMT, Ino: a.Ino})
	if existing, ok := in.Operations().(*node); ok {
		existing.setLink(a.LinkID) // a known inode that got linked elsewhere
	}
	if a.LinkID != "" {
		n.links.set(a.LinkID, in)
	}
	return in
}

// caller is the uid and gid of the process making the request.
func caller(ctx context.Context) (uint32, uint32) {
	if c, ok := gofuse.FromContext(ctx); ok {
		return c.Uid, c.Gid
	}
	return 0, 0
}

func (n *node) ro() syscall.Errno {
	if n.readOnly {
		return syscall.EROFS
	}
	return 0
}

func (n *node) Lookup(ctx context.Context, name string, out *gofuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ctx, done := uninterrupted(ctx)
	defer done()
	a, err := n.v.Lookup(ctx, n.child(name))
	if err != nil {
		if fsview.IsCachedAbsence(err) && n.negTTL > 0 {
			out.SetEntryTimeout(n.negTTL) // a negative entry: see lockRawFS.Lookup
		}
		return nil, n.v.Errno(err)
	}
	return n.newChild(ctx, a, out, name), 0
}

func (n *node) Getattr(ctx context.Context, f gofs.FileHandle, out *gofuse.AttrOut) syscall.Errno {
	ctx, done := uninterrupted(ctx)
	defer done()
	var a fsview.Attr
	var err error
	if h, ok := f.(*handle); ok {
		a, err = h.h.Attr(ctx)
		if err != nil {
			a, err = n.v.Lookup(ctx, n.self())
		}
	} else {
		a, err = n.v.Lookup(ctx, n.self())
	}
	if err != nil {
		return n.v.Errno(err)
	}
	a.Ino = n.StableAttr().Ino // the number it was given (newChild may renumber)
	fillAttr(&out.Attr, a)
	return 0
}

func (n *node) Setattr(ctx context.Context, f gofs.FileHandle, in *gofuse.SetAttrIn, out *gofuse.AttrOut) syscall.Errno {
	ctx, done := uninterrupted(ctx)
	defer done()
	if e := n.ro(); e != 0 {
		return e
	}
	var s fsview.SetAttr
	if m, ok := in.GetMode(); ok {
		mode := goMode(m) &^ os.ModeType
		s.Mode = &mode
	}
	if u, ok := in.GetUID(); ok {
		s.UID = &u
	}
	if g, ok := in.GetGID(); ok {
		s.GID = &g
	}
	if sz, ok := in.GetSize(); ok {
		size := int64(sz)
		s.Size = &size
	}
	if t, ok := in.GetMTime(); ok {
		s.Mtime = &t
	}
	if t, ok := in.GetATime(); ok {
		s.Atime = &t
	}
	var h *fsview.Handle
	if fh, ok := f.(*handle); ok {
		h = fh.h
	}
	a, err := n.v.Setattr(ctx, n.self(), h, s)
	if err != nil {
		return n.v.Errno(err)
	}
	a.Ino = n.StableAttr().Ino // the number it was given (newChild may renumber)
	fillAttr(&out.Attr, a)
	// The answer is fresh: let the kernel keep it as a GETATTR's (go-fuse
	// leaves a SETATTR's at 0, and the kernel would ask again right away:
	// tar's fchown after its utimens, fchmod after that).
	out.SetTimeout(n.attrTTL)
	return 0
}

func (n *node) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	ctx, done := uninterrupted(ctx)
	defer done()
	ents, err := n.v.ReadDir(ctx, n.path())
	if err != nil {
		return nil, n.v.Errno(err)
	}
	list := make([]gofuse.DirEntry, 0, len(ents))
	for _, e := range ents {
		list = append(list, gofuse.DirEntry{Name: e.Name, Mode: unixMode(e.Mode), Ino: e.Ino})
	}
	return gofs.NewListDirStream(list), 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *gofuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ctx, done := uninterrupted(ctx)
	defer done()
	if e := n.ro(); e != 0 {
		return nil, e
	}
	uid, gid := caller(ctx)
	a, err := n.v.Mkdir(ctx, n.child(name), goMode(mode).Perm(), uid, gid)
	if err != nil {
		return nil, n.v.Errno(err)
	}
	return n.newChild(ctx, a, out, name), 0
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	ctx, done := uninterrupted(ctx)
	defer done()
	if e := n.ro(); e != 0 {
		return e
	}
	return n.v.Errno(n.v.Rmdir(ctx, n.child(name)))
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	ctx, done := uninterrupted(ctx)
	defer done()
	if e := n.ro(); e != 0 {
		return e
	}
	return n.v.Errno(n.v.Unlink(ctx, n.child(name)))
}

func (n *node) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	ctx, done := uninterrupted(ctx)
	defer done()
	if e := n.ro(); e != 0 {
		return e
	}
	if flags&gofs.RENAME_EXCHANGE != 0 {
		return syscall.EINVAL
	}
	to := path.Join("/"+newParent.EmbeddedInode().Path(nil), newName)
	const renameNoReplace = 0x1
	return n.v.Errno(n.v.Rename(ctx, n.child(name), to, flags&renameNoReplace != 0))
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *gofuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	ctx, done := uninterrupted(ctx)
	defer done()
	if e := n.ro(); e != 0 {
		return nil, nil, 0, e
	}
	uid, gid := caller(ctx)
	p := n.child(name)
	h, err := n.v.Create(ctx, p, int(flags), goMode(mode), uid, gid)
	if err != nil {
		return nil, nil, 0, n.v.Errno(err)
	}
	a, err := h.Attr(ctx)
	if err != nil {
		h.Release(ctx)
		return nil, nil, 0, n.v.Errno(err)
	}
	in := n.newChild(ctx, a, out, name)
	fh := newHandle(n.v, h, in, flags, n.syncClose)
	return in, fh, fh.openFlags(), 0
}

func (n *node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	ctx, done := uninterrupted(ctx)
	defer done()
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		if e := n.ro(); e != 0 {
			return nil, 0, e
		}
	}
	open := n.v.Open
	if flags&syscall.O_ACCMODE == syscall.O_RDONLY {
		// A small file: fetched whole before the first READ comes, the
		// fetch started while the open checks the entry with the filer.
		open = n.v.OpenForReading
	}
	h, err := open(ctx, n.self(), int(flags))
	if err != nil {
		return nil, 0, n.v.Errno(err)
	}
	fh := newHandle(n.v, h, n.EmbeddedInode(), flags, n.syncClose)
	return fh, fh.openFlags(), 0
}

func (n *node) Symlink(ctx context.Context, target, name string, out *gofuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ctx, done := uninterrupted(ctx)
	defer done()
	if e := n.ro(); e != 0 {
		return nil, e
	}
	uid, gid := caller(ctx)
	a, err := n.v.Symlink(ctx, target, n.child(name), uid, gid)
	if err != nil {
		return nil, n.v.Errno(err)
	}
	return n.newChild(ctx, a, out, name), 0
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	ctx, done := uninterrupted(ctx)
	defer done()
	t, err := n.v.Readlink(ctx, n.path())
	if err != nil {
		return nil, n.v.Errno(err)
	}
	return []byte(t), 0
}

func (n *node) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *gofuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ctx, done := uninterrupted(ctx)
	defer done()
	if e := n.ro(); e != 0 {
		return nil, e
	}
	old := target.EmbeddedInode()
	tn, _ := target.(*node)
	src := "/" + old.Path(nil)
	if tn != nil {
		src = tn.self()
	}
	a, err := n.v.Link(ctx, src, n.child(name))
	if err != nil {
		return nil, n.v.Errno(err)
	}
	if tn != nil {
		tn.setLink(a.LinkID) // the content moved into the link group
		n.links.set(a.LinkID, old)
	}
	// The new name is the same inode to the kernel as the old one.
	a.Ino = old.StableAttr().Ino
	fillAttr(&out.Attr, a)
	return n.NewInode(ctx, &node{v: n.v, readOnly: n.readOnly, syncClose: n.syncClose, links: n.links, negTTL: n.negTTL, attrTTL: n.attrTTL}, old.StableAttr()), 0
}

func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	// Answered from the view's metadata cache where it can be (or refused:
	// names not kept), with no filer call and so no need for the
	// uninterruptible context.
	v, ok, err := n.v.CachedXattr(n.self(), attr)
	if !ok {
		var done context.CancelFunc
		ctx, done = uninterrupted(ctx)
		defer done()
		v, err = n.v.GetXattr(ctx, n.self(), attr)
	}
	if err != nil {
		return 0, n.v.Errno(err)
	}
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	ctx, done := uninterrupted(ctx)
	defer done()
	if e := n.ro(); e != 0 {
		return e
	}
	return n.v.Errno(n.v.SetXattr(ctx, n.self(), attr, data, int(flags)))
}

func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	ctx, done := uninterrupted(ctx)
	defer done()
	if e := n.ro(); e != 0 {
		return e
	}
	return n.v.Errno(n.v.RemoveXattr(ctx, n.self(), attr))
}

func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	ctx, done := uninterrupted(ctx)
	defer done()
	names, err := n.v.ListXattr(ctx, n.self())
	if err != nil {
		return 0, n.v.Errno(err)
	}
	var b []byte
	for _, k := range names {
		b = append(append(b, k...), 0)
	}
	if len(dest) < len(b) {
		return uint32(len(b)), syscall.ERANGE
	}
	return uint32(copy(dest, b)), 0
}

func (n *node) Statfs(ctx context.Context, out *gofuse.StatfsOut) syscall.Errno {
	ctx, done := uninterrupted(ctx)
	defer done()
	s := n.v.StatFS(ctx)
	out.Blocks, out.Bfree, out.Bavail = s.Blocks, s.Bfree, s.Bavail
	out.Files, out.Ffree = s.Files, s.Ffree
	out.Bsize, out.Frsize, out.NameLen = s.Bsize, s.Bsize, s.NameLen
	return 0
}

// preferredIOSize is st_blksize (see fillAttr).
const preferredIOSize = 128 << 10

// fillAttr converts the view's attributes for the kernel.
func fillAttr(out *gofuse.Attr, a fsview.Attr) {
	out.Ino = a.Ino
	out.Mode = unixMode(a.Mode)
	out.Size = uint64(a.Size)
	out.Blocks = (uint64(a.Size) + 511) / 512
	// st_blksize sizes the buffers of cp, cat and stdio. 128 KiB, what
	// coreutils uses for a local disk: with 1 MiB, cp mapped (and faulted
	// in) a fresh 1 MiB buffer for every file it copied, and cat waited for
	// whole 1 MiB reads instead of overlapping them with the read-ahead
	// (docs/mount-speed-history.md, session 28).
	out.Blksize = preferredIOSize
	out.Nlink = a.Nlink
	out.Uid, out.Gid = a.UID, a.GID
	out.Rdev = a.Rdev
	out.SetTimes(&a.Atime, &a.Mtime, &a.Ctime)
}

// unixMode converts Go mode bits to st_mode.
func unixMode(m os.FileMode) uint32 {
	u := uint32(m.Perm())
	switch {
	case m.IsDir():
		u |= syscall.S_IFDIR
	case m&os.ModeSymlink != 0:
		u |= syscall.S_IFLNK
	case m&os.ModeNamedPipe != 0:
		u |= syscall.S_IFIFO
	case m&os.ModeSocket != 0:
		u |= syscall.S_IFSOCK
	case m&os.ModeCharDevice != 0:
		u |= syscall.S_IFCHR
	case m&os.ModeDevice != 0:
		u |= syscall.S_IFBLK
	default:
		u |= syscall.S_IFREG
	}
	if m&os.ModeSetuid != 0 {
		u |= syscall.S_ISUID
	}
	if m&os.ModeSetgid != 0 {
		u |= syscall.S_ISGID
	}
	if m&os.ModeSticky != 0 {
		u |= syscall.S_ISVTX
	}
	return u
}

// goMode converts st_mode bits to Go's.
func goMode(u uint32) os.FileMode {
	m := os.FileMode(u & 0o777)
	switch u & syscall.S_IFMT {
	case syscall.S_IFDIR:
		m |= os.ModeDir
	case syscall.S_IFLNK:
		m |= os.ModeSymlink
	case syscall.S_IFIFO:
		m |= os.ModeNamedPipe
	case syscall.S_IFSOCK:
		m |= os.ModeSocket
	case syscall.S_IFCHR:
		m |= os.ModeDevice | os.ModeCharDevice
	case syscall.S_IFBLK:
		m |= os.ModeDevice
	}
	if u&syscall.S_ISUID != 0 {
		m |= os.ModeSetuid
	}
	if u&syscall.S_ISGID != 0 {
		m |= os.ModeSetgid
	}
	if u&syscall.S_ISVTX != 0 {
		m |= os.ModeSticky
	}
	return m
}

// Fsync of a directory (FSYNCDIR) commits the files closed here whose
// background commit has not run yet and then asks the filer to Sync (creates
// are committed with deferred durability), so that fsync of a directory
// after writing files into it makes them and their names durable, as on a
// local disk. A
// file's FSYNC goes to its handle (handle.Fsync).
func (n *node) Fsync(ctx context.Context, f gofs.FileHandle, flags uint32) syscall.Errno {
	ctx, done := uninterrupted(ctx)
	defer done()
	if h, ok := f.(*handle); ok {
		return h.Fsync(ctx, flags)
	}
	return n.v.Errno(n.v.Sync(ctx))
}

// Mknod makes regular files, FIFOs, sockets and devices (the kernel runs a
// pipe or a socket itself, and opens a device by its number; the mount is
// nodev, so a device file on it does not open).
func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *gofuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ctx, done := uninterrupted(ctx)
	defer done()
	if e := n.ro(); e != 0 {
		return nil, e
	}
	uid, gid := caller(ctx)
	a, err := n.v.Mknod(ctx, n.child(name), goMode(mode), dev, uid, gid)
	if err != nil {
		return nil, n.v.Errno(err)
	}
	return n.newChild(ctx, a, out, name), 0
}
