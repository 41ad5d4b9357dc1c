package fsview

import (
	"github.com/kelpfs/kelp/internal/filer"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// Attr is what stat(2) shows of an inode.
type Attr struct {
	Ino   uint64
	Mode  os.FileMode // Go mode bits: type and permissions (with setuid etc.)
	Size  int64
	Nlink uint32
	UID   uint32
	GID   uint32
	// Atime is the time last set by utimens (the entry's kelp.atime
	// xattr), else Mtime: reads do not update it (noatime).
	Atime, Mtime, Ctime time.Time
	Target              string // symlink target
	Rdev                uint32 // a device's number (st_rdev)
	LinkID              string // the hard-link group, if the file has been linked (see LinkRef)
}

// DirEntry is one name in a directory listing.
type DirEntry struct {
	Name string
	Mode os.FileMode // type bits only are reliable
	Ino  uint64
}

// Names of the xattrs the view keeps for itself on filer entries.
const (
	xattrLink  = filer.HardLinkXattr // on a name: the id of its link group
	xattrNlink = "kelp.nlink"        // on a link group's content entry: the count of names
	xattrAtime = "kelp.atime"        // access time set by utimens, ns since the epoch
	xattrRdev  = "kelp.rdev"         // a device's number (st_rdev), decimal
)

// node is a name resolved to its content: for a hard link the content is
// the group's entry in hiddenDir/links, for anything else the name itself.
type node struct {
	name    *filerpb.Entry
	content *filerpb.Entry
	linkID  string
	// forgets is FS.forgets before the node was resolved: if a file was
	// forgotten since (its commit done), content may be older than that
	// commit (updateContentAs).
	forgets uint64
	// cached: content came from the metadata cache, not from the filer.
	cached bool
}

func (n *node) contentPath() string { return n.content.Path }

func (n *node) isDir() bool { return n.name.IsDir }

func linkPath(id string) string { return filer.HardLinkContentPath(id) }

func timeOf(ns int64) time.Time {
	if ns == 0 {
		return time.Unix(0, 0)
	}
	return time.Unix(0, ns)
}

func entryMode(e *filerpb.Entry) os.FileMode {
	m := os.FileMode(e.Mode)
	if e.IsDir {
		m |= os.ModeDir
	}
	return m
}

// attrOf builds the attributes of n; f, when the content is open here,
// supplies the size and mtime of data not yet committed.
func attrOf(n *node, f *file) Attr {
	c := n.content
	a := Attr{
		Mode: entryMode(c), Size: c.Size, Nlink: 1, UID: c.Uid, GID: c.Gid,
		Mtime: timeOf(c.MtimeNs), Ctime: timeOf(c.CtimeNs), Target: n.name.SymlinkTarget,
	}
	if n.linkID == "" && strings.HasPrefix(n.name.Path, hiddenDir+"/links/") {
		n.linkID = path.Base(n.name.Path) // the content of a link group, reached by its own path
	}
	if n.linkID != "" {
		a.LinkID = n.linkID
		a.Ino = inoOf("link:" + n.linkID)
		if v, err := strconv.Atoi(string(c.Xattrs[xattrNlink])); err == nil && v > 0 {
			a.Nlink = uint32(v)
		}
	} else {
		a.Ino = inoOfEntry(n.name)
	}
	if a.Mode.IsDir() {
		a.Nlink = 2
		a.Size = 4096
	}
	if a.Mode&os.ModeSymlink != 0 {
		a.Size = int64(len(a.Target))
	}
	if a.Mode&os.ModeDevice != 0 {
		if v, err := strconv.ParseUint(string(c.Xattrs[xattrRdev]), 10, 32); err == nil {
			a.Rdev = uint32(v)
		}
	}
	if f != nil {
		// Open here: its entry holds attribute changes not committed yet
		// (they join a background commit, see file.modify).
		var mode uint32
		mode, a.UID, a.GID, a.Size, a.Mtime = f.attrs()
		a.Mode = os.FileMode(mode)
	}
	if a.Ctime.Before(a.Mtime) {
		a.Ctime = a.Mtime
	}
	a.Atime = a.Mtime
	if v, err := strconv.ParseInt(string(c.Xattrs[xattrAtime]), 10, 64); err == nil {
		a.Atime = time.Unix(0, v)
	}
	return a
}

// attrOf is attrOf with the changes of names made here in a directory
// that the filer's times may not show yet (dirTouches).
func (fs *FS) attrOf(n *node, f *file) Attr {
	a := attrOf(n, f)
	if a.Mode.IsDir() {
		fs.touches.apply(n.name.Path, &a)
	}
	return a
}

// inoOfEntry numbers a file by its creation time, which a rename keeps and
// a new file at the same path does not share: a kernel that still holds the
// inode of a removed file must never take a new one at that path for it.
func inoOfEntry(e *filerpb.Entry) uint64 {
	if e.CrtimeNs == 0 {
		return inoOf(e.Path) // the root, or an entry from before creation times
	}
	return inoOf("crtime:" + strconv.FormatInt(e.CrtimeNs, 10) + ":" + strconv.FormatUint(uint64(e.Mode)>>24, 10))
}
