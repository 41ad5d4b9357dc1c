package fsview

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kelpfs/kelp/internal/crtime"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// resolve looks up view path p and, for a hard link, its content.
func (fs *FS) resolve(ctx context.Context, p string) (*node, error) {
	gen := fs.forgetGen()
	n, err := fs.resolveAt(ctx, p)
	if err != nil {
		return nil, err
	}
	n.forgets = gen
	return n, nil
}

func (fs *FS) resolveAt(ctx context.Context, p string) (*node, error) {
	if id, ok := strings.CutPrefix(p, linkRefPrefix); ok {
		e, cached, err := fs.contentAt(ctx, linkPath(id))
		if err != nil {
			return nil, err
		}
		return &node{name: e, content: e, linkID: id, cached: cached}, nil
	}
	if err := checkName(p); err != nil {
		return nil, err
	}
	full := fs.full(p)
	if fs.cfg.Root == "/" && fs.isHidden(full) {
		return nil, errnof(syscall.ENOENT, "%s", p)
	}
	e, cached, err := fs.contentAt(ctx, full)
	if err != nil {
		return nil, err
	}
	n := &node{name: e, content: e, cached: cached}
	if id := string(e.Xattrs[xattrLink]); id != "" && !e.IsDir {
		c, cached, err := fs.contentAt(ctx, linkPath(id))
		if err != nil {
			return nil, err
		}
		n.content, n.linkID, n.cached = c, id, cached
	}
	return n, nil
}

// contentAt is the newest entry at content path cp: the open file's if cp
// is open here (or closed, its commit to come: tar's chmod and utimens
// after close), else the filer's (or the cache's). The open file is asked
// first: a file is forgotten only once its last commit is in the filer,
// while a lookup made first could return the entry that commit replaces,
// with the file forgotten by the time it is asked.
func (fs *FS) contentAt(ctx context.Context, cp string) (e *filerpb.Entry, cached bool, err error) {
	if f := fs.openFile(cp); f != nil {
		return f.entrySnapshot(), false, nil
	}
	return fs.lookupCached(ctx, cp)
}

// linkRefPrefix starts the view paths LinkRef makes.
const linkRefPrefix = "\x00link/"

// LinkRef is a view path for the content of hard-link group id (Attr.LinkID),
// whatever its names are: a caller that keeps inodes (FUSE) addresses a
// hard-linked file's content and attributes through it, since a path
// through one of its names may be the wrong one after a rename over it.
// Only content and attribute calls (Lookup, Open, Setattr, xattrs) take it.
func LinkRef(id string) string { return linkRefPrefix + id }

// waitCreateOf is waitCreate for view path p: the changes of a name are
// made to what the filer has of it, after a create of it answered early
// is done (or refused). Lookups answer from the open file meanwhile.
func (fs *FS) waitCreateOf(p string) {
	if !strings.HasPrefix(p, linkRefPrefix) && checkName(p) == nil {
		fs.waitCreate(fs.full(p))
	}
}

// openFile returns the open file of a content path, if any.
func (fs *FS) openFile(contentPath string) *file {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.fileAt(contentPath)
}

// Lookup returns the attributes of p.
func (fs *FS) Lookup(ctx context.Context, p string) (Attr, error) {
	n, err := fs.resolve(ctx, p)
	if err != nil {
		return Attr{}, err
	}
	return fs.attrOf(n, fs.openFile(n.contentPath())), nil
}

// ReadDir lists directory p in name order.
func (fs *FS) ReadDir(ctx context.Context, p string) ([]DirEntry, error) {
	fs.settle() // the names created here are in the filer
	full := fs.full(p)
	var out []DirEntry
	after := ""
	gen := fs.cache.generation()
	tok := fs.cache.beginList(full)
	var names []string
	complete := false
	defer func() { fs.cache.endList(tok, complete, names) }()
	for {
		stream, err := fs.filer.ListEntries(ctx, &filerpb.ListEntriesRequest{Dir: full, StartAfter: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		more := false
		for {
			r, err := stream.Recv()
			if errors.Is(err, ioEOF) {
				break
			}
			if err != nil {
				return nil, err
			}
			e := r.Entry
			fs.cache.put(gen, e) // ls -l stats every name next
			after = path.Base(e.Path)
			names = append(names, after)
			more = r.More
			if fs.isHidden(e.Path) {
				continue
			}
			ino := inoOfEntry(e)
			if id := string(e.Xattrs[xattrLink]); id != "" {
				ino = inoOf("link:" + id)
			}
			out = append(out, DirEntry{Name: after, Mode: entryMode(e), Ino: ino})
		}
		if !more {
			complete = true
			return out, nil
		}
	}
}

// Mkdir makes directory p; its parent must exist.
func (fs *FS) Mkdir(ctx context.Context, p string, perm os.FileMode, uid, gid uint32) (Attr, error) {
	if err := checkName(p); err != nil {
		return Attr{}, err
	}
	gid, mode := fs.inherit(ctx, p, gid, os.ModeDir|perm)
	e := &filerpb.Entry{Path: fs.full(p), Mode: uint32(mode), IsDir: true, Uid: uid, Gid: gid,
		MtimeNs: time.Now().UnixNano()}
	// A directory made here is empty: its listing is known (untar into it).
	tok := fs.cache.beginList(e.Path)
	err := fs.create(deferred(ctx), e, true)
	fs.cache.endList(tok, err == nil, nil)
	if err != nil {
		return Attr{}, err
	}
	return fs.Lookup(ctx, p)
}

// inherit is the group and mode of a new entry at p made by a caller in
// group gid: a directory with the setgid bit gives what is made in it its
// own group, and the directories made in it its setgid bit too (the BSD
// rule, which Linux keeps for such directories). The parent's attributes
// come from the metadata cache when it has them (the kernel looked the
// directory up just before).
func (fs *FS) inherit(ctx context.Context, p string, gid uint32, mode os.FileMode) (uint32, os.FileMode) {
	parent, err := fs.Lookup(ctx, path.Dir(p))
	if err != nil || parent.Mode&os.ModeSetgid == 0 {
		return gid, mode
	}
	if mode.IsDir() {
		mode |= os.ModeSetgid
	}
	return parent.GID, mode
}

// Rmdir removes the empty directory p.
func (fs *FS) Rmdir(ctx context.Context, p string) error {
	fs.waitCreateOf(p)
	n, err := fs.resolve(ctx, p)
	if err != nil {
		return err
	}
	if !n.isDir() {
		return errnof(syscall.ENOTDIR, "%s", p)
	}
	if n.name.Path == fs.cfg.Root {
		return errnof(syscall.EBUSY, "%s", p)
	}
	return fs.delete(ctx, n.name.Path, false)
}

// Unlink removes the name p. A file open here stays readable and writable
// through its handles until the last one is released.
func (fs *FS) Unlink(ctx context.Context, p string) error {
	fs.waitCreateOf(p)
	n, err := fs.resolve(ctx, p)
	if err != nil {
		return err
	}
	if n.isDir() {
		return errnof(syscall.EISDIR, "%s", p)
	}
	if n.linkID != "" {
		if err := fs.delete(ctx, n.name.Path, false); err != nil {
			return err
		}
		return fs.dropLink(ctx, n.linkID)
	}
	if f := fs.openFile(n.contentPath()); f != nil {
		return fs.hideOpen(ctx, f)
	}
	return fs.delete(ctx, n.name.Path, false)
}

// hideOpen moves an open file out of the namespace, into hiddenDir, where
// its content lives until its last handle is released (NFS does the same
// with .nfs files): a deleted entry's chunks would be collected at once.
func (fs *FS) hideOpen(ctx context.Context, f *file) error {
	if err := f.flush(ctx); err != nil {
		return err
	}
	dst := hiddenDir + "/unlinked/" + newID()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f.refs == 0 {
		// Closed, only waiting for (or done with) its background commit,
		// which the flush above has made: no handle needs the content.
		if err := fs.delete(ctx, f.path, false); err != nil {
			return err
		}
		// Forgotten now, not when its background commit gets round to it:
		// until then a lookup of the name would answer from the file (a
		// removed name found again, and cached by the kernel for a second).
		if fs.files[f.path] == f {
			delete(fs.files, f.path)
			fs.forgets++
		}
		f.mu.Lock()
		f.forgotten = true
		f.dropReadAhead()
		f.mu.Unlock()
		return nil
	}
	if err := fs.mkdirAll(ctx, path.Dir(dst)); err != nil {
		return err
	}
	if err := fs.rename(ctx, f.path, dst); err != nil {
		return err
	}
	delete(fs.files, f.path)
	fs.forgets++
	f.setPath(dst)
	f.unlinked = true
	fs.files[dst] = f
	return nil
}

func (fs *FS) mkdirAll(ctx context.Context, dir string) error {
	fs.settle()
	fs.cache.evict(dir)
	fs.cache.beginOwn(dir)
	_, err := fs.filer.CreateEntry(ctx, &filerpb.CreateEntryRequest{
		Entry: &filerpb.Entry{Path: dir, Mode: uint32(os.ModeDir | 0o700), IsDir: true}})
	fs.cache.endOwn(err, dir)
	return err
}

// dropLink counts one name less in link group id and removes its content
// with the last name (or at the last release, if it is open here).
func (fs *FS) dropLink(ctx context.Context, id string) error {
	cp := linkPath(id)
	var left int
	_, err := fs.updateContent(ctx, cp, nil, func(e *filerpb.Entry) error {
		left, _ = strconv.Atoi(string(e.Xattrs[xattrNlink]))
		left--
		setXattr(e, xattrNlink, []byte(strconv.Itoa(left)))
		return nil
	})
	if err != nil || left > 0 {
		return err
	}
	if f := fs.openFile(cp); f != nil {
		fs.mu.Lock()
		f.unlinked = true
		fs.mu.Unlock()
		return nil
	}
	return fs.delete(ctx, cp, false)
}

// Rename moves from to to, replacing a file or empty directory there
// (unless noReplace).
func (fs *FS) Rename(ctx context.Context, from, to string, noReplace bool) error {
	if err := checkName(to); err != nil {
		return err
	}
	fs.waitCreateOf(from)
	fs.waitCreateOf(to)
	src, err := fs.resolve(ctx, from)
	if err != nil {
		return err
	}
	dst, err := fs.resolve(ctx, to)
	switch {
	case err == nil && noReplace:
		return errnof(syscall.EEXIST, "%s", to)
	case err == nil && dst.name.Path == src.name.Path:
		return nil
	case err == nil && src.linkID != "" && src.linkID == dst.linkID:
		// Two names of one inode: POSIX says rename does nothing.
		return nil
	case err == nil && src.isDir() && !dst.isDir():
		return errnof(syscall.ENOTDIR, "%s", to)
	case err == nil && !src.isDir() && dst.isDir():
		return errnof(syscall.EISDIR, "%s", to)
	case err == nil && dst.linkID == "" && !dst.isDir():
		if f := fs.openFile(dst.contentPath()); f != nil {
			if err := fs.hideOpen(ctx, f); err != nil {
				return err
			}
		}
	case err != nil && !isNotFound(err):
		return err
	}
	if src.linkID == "" {
		if f := fs.openFile(src.contentPath()); f != nil {
			// Commit first: the rename moves the committed entry.
			if err := f.flush(ctx); err != nil {
				return err
			}
		}
	}
	if src.isDir() {
		// The files below written here and not yet committed (a background
		// commit after close may be on its way) commit first too: a commit
		// sent to the old path after the rename would find nothing there,
		// and the data written would be lost. A failed commit is the file's
		// to report (its next flush or fsync), not the rename's.
		for _, f := range fs.openUnder(src.name.Path) {
			f.commitQuiet(ctx)
		}
	}
	if err := fs.rename(ctx, src.name.Path, fs.full(to)); err != nil {
		return err
	}
	fs.renameOpen(src.name.Path, fs.full(to))
	if dst != nil && dst.linkID != "" {
		return fs.dropLink(ctx, dst.linkID)
	}
	return nil
}

// openUnder returns the files open here below directory dir.
func (fs *FS) openUnder(dir string) []*file {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var fl []*file
	for p, f := range fs.files {
		if strings.HasPrefix(p, dir+"/") {
			fl = append(fl, f)
		}
	}
	return fl
}

// renameOpen re-keys the open files at or under from.
func (fs *FS) renameOpen(from, to string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for p, f := range fs.files {
		if p == from || strings.HasPrefix(p, from+"/") {
			np := to + p[len(from):]
			delete(fs.files, p)
			fs.forgets++
			f.setPath(np)
			fs.files[np] = f
		}
	}
}

// Symlink makes p a symbolic link to target.
func (fs *FS) Symlink(ctx context.Context, target, p string, uid, gid uint32) (Attr, error) {
	if err := checkName(p); err != nil {
		return Attr{}, err
	}
	gid, _ = fs.inherit(ctx, p, gid, os.ModeSymlink)
	e := &filerpb.Entry{Path: fs.full(p), Mode: uint32(os.ModeSymlink | 0o777), SymlinkTarget: target,
		Uid: uid, Gid: gid, MtimeNs: time.Now().UnixNano()}
	if err := fs.create(deferred(ctx), e, true); err != nil {
		return Attr{}, err
	}
	return fs.Lookup(ctx, p)
}

// Readlink returns the target of symlink p.
func (fs *FS) Readlink(ctx context.Context, p string) (string, error) {
	n, err := fs.resolve(ctx, p)
	if err != nil {
		return "", err
	}
	if entryMode(n.name)&os.ModeSymlink == 0 {
		return "", errnof(syscall.EINVAL, "%s is not a symlink", p)
	}
	return n.name.SymlinkTarget, nil
}

// Link makes newp another name of the file at oldp. The first link moves
// the content into a link group (hiddenDir/links/<id>) that every name
// refers to by the xattr kelp.hardlink.
func (fs *FS) Link(ctx context.Context, oldp, newp string) (Attr, error) {
	if err := checkName(newp); err != nil {
		return Attr{}, err
	}
	fs.waitCreateOf(oldp)
	fs.waitCreateOf(newp)
	n, err := fs.resolve(ctx, oldp)
	if err != nil {
		return Attr{}, err
	}
	if n.isDir() {
		return Attr{}, errnof(syscall.EPERM, "hard link to a directory")
	}
	if _, err := fs.resolve(ctx, newp); err == nil {
		return Attr{}, errnof(syscall.EEXIST, "%s", newp)
	}
	id := n.linkID
	if id == "" {
		if id, err = fs.makeLinkGroup(ctx, n); err != nil {
			return Attr{}, err
		}
	} else if _, err := fs.updateContent(ctx, linkPath(id), nil, func(e *filerpb.Entry) error {
		v, _ := strconv.Atoi(string(e.Xattrs[xattrNlink]))
		setXattr(e, xattrNlink, []byte(strconv.Itoa(v+1)))
		return nil
	}); err != nil {
		return Attr{}, err
	}
	if err := fs.create(ctx, pointerEntry(fs.full(newp), n.name, id), true); err != nil {
		return Attr{}, err
	}
	return fs.Lookup(ctx, newp)
}

// makeLinkGroup moves the content of the plain file n into a new link
// group with two names to come and leaves a pointer at n's path.
func (fs *FS) makeLinkGroup(ctx context.Context, n *node) (string, error) {
	if f := fs.openFile(n.contentPath()); f != nil {
		if err := f.flush(ctx); err != nil {
			return "", err
		}
	}
	id := newID()
	cp := linkPath(id)
	if err := fs.mkdirAll(ctx, path.Dir(cp)); err != nil {
		return "", err
	}
	if err := fs.rename(ctx, n.name.Path, cp); err != nil {
		return "", err
	}
	fs.renameOpen(n.name.Path, cp)
	if _, err := fs.updateContent(ctx, cp, nil, func(e *filerpb.Entry) error {
		setXattr(e, xattrNlink, []byte("2"))
		return nil
	}); err != nil {
		return "", err
	}
	if err := fs.create(ctx, pointerEntry(n.name.Path, n.name, id), true); err != nil {
		return "", err
	}
	return id, nil
}

func pointerEntry(full string, like *filerpb.Entry, id string) *filerpb.Entry {
	return &filerpb.Entry{Path: full, Mode: like.Mode, Uid: like.Uid, Gid: like.Gid, MtimeNs: like.MtimeNs,
		Xattrs: map[string][]byte{xattrLink: []byte(id)}}
}

// updateContent changes the entry at content path cp with fn: through the
// open file when there is one (so that its buffered data is committed
// with it), else read-modify-write of known (the entry at cp as just
// resolved; nil: look it up). It returns the entry as changed, so that the
// caller answers without asking the filer again.
func (fs *FS) updateContent(ctx context.Context, cp string, known *node, fn func(e *filerpb.Entry) error) (*filerpb.Entry, error) {
	return fs.updateContentAs(ctx, cp, known, fn, false)
}

// updateContentAs is updateContent; with lazy, a change of a file open here
// joins its next commit instead of being sent now (file.modify).
func (fs *FS) updateContentAs(ctx context.Context, cp string, n *node, fn func(e *filerpb.Entry) error, lazy bool) (*filerpb.Entry, error) {
	// Attribute changes (chmod, chown, utimens, xattrs) are made durable by
	// fsync, like the data: deferred, as creates.
	ctx = deferred(ctx)
	for {
		f := fs.openFile(cp)
		if f == nil {
			break
		}
		e, err := f.modify(ctx, fn, lazy)
		if err != errForgotten {
			return e, err
		}
		// Forgotten while this waited for it (its background commit ended):
		// no longer in fs.files, so the next round goes to the filer, for
		// the entry as that commit left it.
		n = nil
	}
	var e *filerpb.Entry
	if n != nil && fs.forgetGen() == n.forgets {
		// No file was forgotten since n was resolved: had one been open at
		// cp then, it would still be (and found above).
		e = n.content
	}
	if e == nil || e.Path != cp {
		var err error
		if e, err = fs.lookupRaw(ctx, cp); err != nil {
			return nil, err
		}
	} else {
		e = cloneEntry(e)
	}
	if err := fn(e); err != nil {
		return nil, err
	}
	// The filer sets the ctime of what it stores, at or after sent (on
	// this host's clock): answered now (the kernel keeps it a second),
	// sent is near enough, and the ctime read later never goes back.
	sent := time.Now()
	if err := fs.update(ctx, e); err != nil {
		return nil, err
	}
	e.CtimeNs = sent.UnixNano()
	return e, nil
}

func setXattr(e *filerpb.Entry, k string, v []byte) {
	if e.Xattrs == nil {
		e.Xattrs = map[string][]byte{}
	}
	e.Xattrs[k] = v
}

// SetAttr says which attributes Setattr changes (nil: unchanged).
type SetAttr struct {
	Mode  *os.FileMode // permission bits with os.ModeSetuid, ModeSetgid, ModeSticky
	UID   *uint32
	GID   *uint32
	Size  *int64
	Mtime *time.Time
	// Atime is kept in the entry's kelp.atime xattr; reads do not update
	// it (as with the noatime mount option): see attrOf.
	Atime *time.Time
}

// Setattr changes attributes of p (h, if given, is an open handle of it).
// Its answer is built from the entry it stored: one filer round trip for
// a file not open here (tar's chmod and utimens after each file).
func (fs *FS) Setattr(ctx context.Context, p string, h *Handle, s SetAttr) (Attr, error) {
	n, err := fs.resolve(ctx, p)
	if err != nil && h == nil {
		return Attr{}, err
	}
	var cp string
	if h != nil {
		cp = h.f.currentPath()
	} else {
		cp = n.contentPath()
	}
	if s.Size != nil {
		if n != nil && n.isDir() {
			return Attr{}, errnof(syscall.EISDIR, "%s", p)
		}
		if err := fs.truncate(ctx, cp, *s.Size); err != nil {
			return Attr{}, err
		}
		if n != nil {
			n.content = nil // changed: look it up for the attributes
		}
	}
	if s.Mode != nil || s.UID != nil || s.GID != nil || s.Mtime != nil || s.Atime != nil {
		if s.Mtime != nil && n != nil && n.isDir() {
			// The mtime set here must stay: the creates in the directory
			// still on their way (AsyncCreate) would move it when they
			// reach the filer (tar and rsync set a directory's mtime after
			// filling it).
			fs.settle()
			fs.touches.forget(cp)
		}
		e, err := fs.updateContentAs(ctx, cp, n, func(e *filerpb.Entry) error {
			if s.Mode != nil {
				e.Mode = uint32(os.FileMode(e.Mode)&os.ModeType | *s.Mode&(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky))
			}
			if s.UID != nil {
				e.Uid = *s.UID
			}
			if s.GID != nil {
				e.Gid = *s.GID
			}
			if s.Mtime != nil {
				e.MtimeNs = s.Mtime.UnixNano()
			}
			if s.Atime != nil {
				setXattr(e, xattrAtime, []byte(strconv.FormatInt(s.Atime.UnixNano(), 10)))
			}
			return nil
		}, true)
		if err != nil {
			return Attr{}, err
		}
		if h == nil {
			return fs.attrAfterUpdate(n, e), nil
		}
	}
	if h != nil {
		return h.Attr(ctx)
	}
	return fs.Lookup(ctx, p)
}

// attrAfterUpdate is the attributes of n once its content is e.
func (fs *FS) attrAfterUpdate(n *node, e *filerpb.Entry) Attr {
	m := &node{name: n.name, content: e, linkID: n.linkID}
	if n.linkID == "" {
		m.name = e
	}
	return fs.attrOf(m, fs.openFile(e.Path))
}

func (fs *FS) truncate(ctx context.Context, cp string, size int64) error {
	f, err := fs.acquire(ctx, cp)
	if err != nil {
		return err
	}
	defer fs.release(ctx, f)
	return f.truncate(ctx, size)
}

// Xattrs the view keeps: names in these namespaces but security.selinux.
//
// The others are not supported (ENOTSUP, as from a file system without
// them): POSIX ACLs (system.posix_acl_access and _default: the mount
// enforces none) and SELinux labels (security.selinux: SELinux labels a
// FUSE mount by its policy, never from the file system, and refuses to set
// one on it). ls -l asks both of every name it lists; ENOTSUP makes it stop
// asking for the rest of the mount (coreutils remembers it per device),
// where ENODATA cost two kernel round trips per name.
func visibleXattr(k string) bool {
	return k != "security.selinux" &&
		(strings.HasPrefix(k, "user.") || strings.HasPrefix(k, "trusted.") || strings.HasPrefix(k, "security."))
}

// GetXattr returns the value of extended attribute k of p (ENODATA if
// unset, ENOTSUP for a name not kept, see visibleXattr).
func (fs *FS) GetXattr(ctx context.Context, p, k string) ([]byte, error) {
	if !visibleXattr(k) {
		return nil, syscall.ENOTSUP // no need to resolve p
	}
	if v, found, ok := fs.cachedXattr(p, k); ok {
		// Answered from the metadata cache without copying the entry.
		if !found {
			return nil, syscall.ENODATA
		}
		return v, nil
	}
	// resolve answers with the open file's entry if the file is open here.
	n, err := fs.resolve(ctx, p)
	if err != nil {
		return nil, err
	}
	v, ok := n.content.Xattrs[k]
	if !ok {
		return nil, syscall.ENODATA
	}
	return v, nil
}

// cachedXattr is GetXattr of an ordinary path (not a link group's, not
// open here) answered from the metadata cache; ok false when it cannot be.
func (fs *FS) cachedXattr(p, k string) (v []byte, found, ok bool) {
	if strings.HasPrefix(p, linkRefPrefix) || checkName(p) != nil {
		return nil, false, false
	}
	full := fs.full(p)
	if fs.cfg.Root == "/" && fs.isHidden(full) {
		return nil, false, false
	}
	if fs.openFile(full) != nil {
		return nil, false, false
	}
	return fs.cache.xattr(full, k)
}

// CachedXattr is GetXattr of p answered from the metadata cache, with no
// filer call (ok false when it cannot be answered so: then call GetXattr).
func (fs *FS) CachedXattr(p, k string) (v []byte, ok bool, err error) {
	if !visibleXattr(k) {
		return nil, true, syscall.ENOTSUP
	}
	v, found, ok := fs.cachedXattr(p, k)
	if !ok {
		return nil, false, nil
	}
	if !found {
		return nil, true, syscall.ENODATA
	}
	return v, true, nil
}

// ListXattr returns the names of p's extended attributes.
func (fs *FS) ListXattr(ctx context.Context, p string) ([]string, error) {
	n, err := fs.resolve(ctx, p) // the open file's entry if open here
	if err != nil {
		return nil, err
	}
	var out []string
	for k := range n.content.Xattrs {
		if visibleXattr(k) {
			out = append(out, k)
		}
	}
	return out, nil
}

// Xattr flags of setxattr(2).
const (
	XattrCreate  = 1
	XattrReplace = 2
)

// SetXattr sets extended attribute k of p.
func (fs *FS) SetXattr(ctx context.Context, p, k string, v []byte, flags int) error {
	if !visibleXattr(k) {
		return syscall.ENOTSUP
	}
	n, err := fs.resolve(ctx, p)
	if err != nil {
		return err
	}
	_, err = fs.updateContent(ctx, n.contentPath(), n, func(e *filerpb.Entry) error {
		_, has := e.Xattrs[k]
		if has && flags&XattrCreate != 0 {
			return syscall.EEXIST
		}
		if !has && flags&XattrReplace != 0 {
			return syscall.ENODATA
		}
		setXattr(e, k, append([]byte(nil), v...))
		return nil
	})
	return err
}

// RemoveXattr removes extended attribute k of p (ENODATA if unset).
func (fs *FS) RemoveXattr(ctx context.Context, p, k string) error {
	if !visibleXattr(k) {
		return syscall.ENOTSUP
	}
	n, err := fs.resolve(ctx, p)
	if err != nil {
		return err
	}
	_, err = fs.updateContent(ctx, n.contentPath(), n, func(e *filerpb.Entry) error {
		if _, ok := e.Xattrs[k]; !ok || !visibleXattr(k) {
			return syscall.ENODATA
		}
		delete(e.Xattrs, k)
		return nil
	})
	return err
}

// Statfs describes the file system's capacity.
type Statfs struct {
	Blocks, Bfree, Bavail, Files, Ffree uint64
	Bsize                               uint32
	NameLen                             uint32
}

// StatFS answers statfs(2) with the cluster's capacity as the filer reports
// it from the master's topology (filerpb Statfs): blocks are the volume
// servers' volume slots times the volume size limit, free blocks what is
// left of that, bounded by the disks' free space. The filer keeps no inode
// count: Files is the needles stored plus a large Ffree. When the filer
// cannot answer, the last answer (or 1 PiB before any) is reported: df
// must not fail because a master is briefly away.
func (fs *FS) StatFS(ctx context.Context) Statfs {
	const bsize = 4096
	const inodes = 1 << 40
	out := Statfs{Bsize: bsize, NameLen: maxNameLen, Ffree: inodes}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// With the view's root under a directory quota (a CSI volume) the
	// filer answers with the quota: df shows the volume's capacity.
	r, err := fs.filer.Statfs(ctx, &filerpb.StatfsRequest{Path: fs.cfg.Root})
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err != nil {
		fs.log.Debug("fsview: statfs from the filer failed", "err", err)
		r = fs.lastStatfs
	} else {
		fs.lastStatfs = r
	}
	if r == nil {
		const total = 1 << 50 / bsize // 1 PiB
		out.Blocks, out.Bfree, out.Bavail, out.Files = total, total, total, inodes
		return out
	}
	out.Blocks, out.Bfree = r.TotalBytes/bsize, r.FreeBytes/bsize
	out.Bavail = out.Bfree
	out.Files = r.Files + inodes
	if r.Quota && r.MaxFiles > 0 {
		out.Files, out.Ffree = r.MaxFiles, r.MaxFiles-min(r.Files, r.MaxFiles)
	}
	return out
}

func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func cloneEntry(e *filerpb.Entry) *filerpb.Entry { return proto.Clone(e).(*filerpb.Entry) }

// RemoveAll removes p and, for a directory, everything under it (WebDAV
// DELETE of a collection). Hard-link groups with names inside keep their
// content while other names are left.
func (fs *FS) RemoveAll(ctx context.Context, p string) error {
	n, err := fs.resolve(ctx, p)
	if err != nil {
		return err
	}
	if !n.isDir() {
		return fs.Unlink(ctx, p)
	}
	if n.name.Path == fs.cfg.Root {
		return errnof(syscall.EBUSY, "the root cannot be removed")
	}
	return fs.delete(ctx, n.name.Path, true)
}

// specialTypes are the file types Mknod makes besides regular files: the
// kernel runs a FIFO or a socket itself and opens a device by its number;
// the filer only keeps the name, the type and (for a device) the number.
const specialTypes = os.ModeNamedPipe | os.ModeSocket | os.ModeDevice | os.ModeCharDevice

// Mknod makes a regular file, a FIFO (os.ModeNamedPipe), a socket
// (os.ModeSocket) or a device (os.ModeDevice, with os.ModeCharDevice for a
// character device) numbered rdev at p.
func (fs *FS) Mknod(ctx context.Context, p string, mode os.FileMode, rdev uint32, uid, gid uint32) (Attr, error) {
	if err := checkName(p); err != nil {
		return Attr{}, err
	}
	switch mode.Type() {
	case 0, os.ModeNamedPipe, os.ModeSocket, os.ModeDevice, os.ModeDevice | os.ModeCharDevice:
	default:
		return Attr{}, errnof(syscall.EINVAL, "mknod %s: file type %v", p, mode.Type())
	}
	gid, mode = fs.inherit(ctx, p, gid, mode)
	now := crtime.Unique(time.Now()).UnixNano() // the inode number (inoOfEntry)
	e := &filerpb.Entry{Path: fs.full(p), Mode: uint32(mode & (specialTypes | os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)),
		Uid: uid, Gid: gid, MtimeNs: now, CrtimeNs: now}
	if mode&os.ModeDevice != 0 {
		e.Xattrs = map[string][]byte{xattrRdev: []byte(strconv.FormatUint(uint64(rdev), 10))}
	}
	if err := fs.create(deferred(ctx), e, true); err != nil {
		return Attr{}, err
	}
	return fs.Lookup(ctx, p)
}
