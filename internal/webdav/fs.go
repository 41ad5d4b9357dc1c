package webdav

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	xwebdav "golang.org/x/net/webdav"

	"github.com/kelpfs/kelp/internal/fsview"
)

// fileSystem is x/net/webdav's FileSystem over a view.
type fileSystem struct{ v *fsview.FS }

var _ xwebdav.FileSystem = fileSystem{}

// osErr turns a view error into the *os.PathError the webdav package
// classifies (os.IsNotExist -> 404/409, os.IsExist -> 405, ...).
func osErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	return &os.PathError{Op: op, Path: name, Err: fsview.Errno(err)}
}

// cleanName is name without a trailing slash or any other redundancy: the
// engine passes names as the request gave them, and a collection's URL
// often ends in a slash ("COPY /f" to "/coll/" with Overwrite: T deletes
// the collection and creates the file at "/coll", RFC 4918 9.8.4).
func cleanName(name string) string { return path.Clean("/" + name) }

func (f fileSystem) Mkdir(ctx context.Context, name string, perm os.FileMode) error {
	name = cleanName(name)
	_, err := f.v.Mkdir(ctx, name, perm.Perm()|0o755, 0, 0)
	return osErr("mkdir", name, err)
}

func (f fileSystem) OpenFile(ctx context.Context, name string, flag int, perm os.FileMode) (xwebdav.File, error) {
	name = cleanName(name)
	opened, err := f.openFile(ctx, name, flag)
	noteOpenErr(ctx, err)
	if snap, ok := ctx.Value(lockSnapKey{}).(*lockSnap); ok {
		switch o := opened.(type) {
		case *file:
			o.locks = snap
		case *dir:
			o.locks = snap
		}
	}
	return opened, err
}

func (f fileSystem) openFile(ctx context.Context, name string, flag int) (xwebdav.File, error) {
	a, err := f.v.Lookup(ctx, name)
	switch {
	case err == nil && a.Mode.IsDir():
		// PROPPATCH opens a collection O_RDWR; writing to it stays EISDIR.
		if flag&(os.O_WRONLY|os.O_TRUNC) != 0 {
			return nil, osErr("open", name, syscall.EISDIR)
		}
		return &dir{v: f.v, name: name, attr: a}, nil
	case err != nil && flag&os.O_CREATE == 0:
		return nil, osErr("open", name, err)
	}
	if flag&os.O_TRUNC != 0 && flag&os.O_CREATE != 0 {
		return f.openStaged(ctx, name, err == nil)
	}
	var h *fsview.Handle
	if flag&os.O_CREATE != 0 {
		h, err = f.v.Create(context.WithoutCancel(ctx), name, flag, 0o644, 0, 0)
	} else {
		h, err = f.v.Open(context.WithoutCancel(ctx), name, flag)
	}
	if err != nil {
		return nil, osErr("open", name, err)
	}
	fl := &file{v: f.v, h: h, name: name}
	if slot, ok := ctx.Value(openErrKey{}).(*openErr); ok {
		fl.slot = slot
	}
	return fl, nil
}

func (f fileSystem) RemoveAll(ctx context.Context, name string) error {
	name = cleanName(name)
	return osErr("remove", name, f.v.RemoveAll(ctx, name))
}

func (f fileSystem) Rename(ctx context.Context, oldName, newName string) error {
	oldName, newName = cleanName(oldName), cleanName(newName)
	return osErr("rename", oldName, f.v.Rename(ctx, oldName, newName, false))
}

func (f fileSystem) Stat(ctx context.Context, name string) (os.FileInfo, error) {
	name = cleanName(name)
	a, err := f.v.Lookup(ctx, name)
	if err != nil {
		return nil, osErr("stat", name, err)
	}
	return info{name: path.Base(name), a: a}, nil
}

// info is os.FileInfo of a view attribute.
type info struct {
	name string
	a    fsview.Attr
}

func (i info) Name() string       { return i.name }
func (i info) Size() int64        { return i.a.Size }
func (i info) Mode() os.FileMode  { return i.a.Mode }
func (i info) ModTime() time.Time { return i.a.Mtime }
func (i info) IsDir() bool        { return i.a.Mode.IsDir() }
func (i info) Sys() any           { return nil }

// ETag is the entity tag served for the resource (x/net/webdav's ETager),
// and the one If header conditions are compared with (filerLS.Confirm).
func (i info) ETag(context.Context) (string, error) { return etagOf(i.a), nil }

// etagOf is a resource's entity tag: its mtime in nanoseconds and its size,
// in hex (the form x/net/webdav gives by default, kept so that no client's
// cached tags change).
func etagOf(a fsview.Attr) string { return fmt.Sprintf(`"%x%x"`, a.Mtime.UnixNano(), a.Size) }

// file is an open file; reads and writes move one position, as a File must.
type file struct {
	v     *fsview.FS
	h     *fsview.Handle
	name  string
	pos   int64
	locks *lockSnap // PROPFIND: the locks lockdiscovery shows
	slot  *openErr  // GET: where a failed first read is noted
	read  bool
}

func (f *file) Read(p []byte) (int, error) {
	n, err := f.h.ReadAt(context.Background(), p, f.pos)
	f.pos += int64(n)
	if err != nil && !errors.Is(err, io.EOF) {
		if !f.read && n == 0 && f.slot != nil {
			f.slot.readErr = err
		}
		f.read = true
		return n, osErr("read", f.name, err)
	}
	f.read = true
	return n, err
}

func (f *file) Write(p []byte) (int, error) {
	n, err := f.h.WriteAt(context.Background(), p, f.pos)
	f.pos += int64(n)
	return n, osErr("write", f.name, err)
}

func (f *file) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		off += f.pos
	case io.SeekEnd:
		a, err := f.h.Attr(context.Background())
		if err != nil {
			return 0, osErr("seek", f.name, err)
		}
		off += a.Size
	}
	if off < 0 {
		return 0, osErr("seek", f.name, syscall.EINVAL)
	}
	f.pos = off
	return off, nil
}

func (f *file) Readdir(int) ([]fs.FileInfo, error) {
	return nil, osErr("readdir", f.name, syscall.ENOTDIR)
}

func (f *file) Stat() (fs.FileInfo, error) {
	a, err := f.h.Attr(context.Background())
	if err != nil {
		return nil, osErr("stat", f.name, err)
	}
	return info{name: path.Base(f.name), a: a}, nil
}

// Close commits what was written: a PUT answers only once it is durable.
func (f *file) Close() error {
	ctx := context.Background()
	err := f.h.Flush(ctx)
	if rerr := f.h.Release(ctx); err == nil {
		err = rerr
	}
	return osErr("close", f.name, err)
}

// dir is an open collection.
type dir struct {
	v     *fsview.FS
	name  string
	attr  fsview.Attr
	ents  []fs.FileInfo
	read  bool
	locks *lockSnap // PROPFIND: the locks lockdiscovery shows
}

func (d *dir) Read([]byte) (int, error)       { return 0, osErr("read", d.name, syscall.EISDIR) }
func (d *dir) Write([]byte) (int, error)      { return 0, osErr("write", d.name, syscall.EISDIR) }
func (d *dir) Seek(int64, int) (int64, error) { return 0, nil }
func (d *dir) Close() error                   { return nil }
func (d *dir) Stat() (fs.FileInfo, error)     { return info{name: path.Base(d.name), a: d.attr}, nil }

// Readdir lists the collection with each member's attributes.
func (d *dir) Readdir(count int) ([]fs.FileInfo, error) {
	if !d.read {
		ctx := context.Background()
		ents, err := d.v.ReadDir(ctx, d.name)
		if err != nil {
			return nil, osErr("readdir", d.name, err)
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name, stagePrefix) {
				continue // a PUT in progress (openStaged)
			}
			a, err := d.v.Lookup(ctx, path.Join(d.name, e.Name))
			if err != nil {
				continue // removed meanwhile
			}
			d.ents = append(d.ents, info{name: e.Name, a: a})
		}
		d.read = true
	}
	if count <= 0 {
		out := d.ents
		d.ents = nil
		return out, nil
	}
	if len(d.ents) == 0 {
		return nil, io.EOF
	}
	n := min(count, len(d.ents))
	out := d.ents[:n]
	d.ents = d.ents[n:]
	return out, nil
}

// openErr keeps the error of a request's OpenFile: x/net/webdav answers
// every failed open of a GET or HEAD 404, also when the filer could not be
// reached; the handler turns those into 503 (see unreachableWriter).
// readErr is the error of a GET's first read of the content, which
// http.ServeContent would otherwise follow with a 200 cut short.
type openErr struct{ err, readErr error }

type openErrKey struct{}

func noteOpenErr(ctx context.Context, err error) {
	if slot, ok := ctx.Value(openErrKey{}).(*openErr); ok && err != nil {
		slot.err = err
	}
}

// missing reports whether err says the file is not there (a true 404),
// rather than that the view could not find out.
func missing(err error) bool {
	var en syscall.Errno
	if !errors.As(err, &en) {
		return false
	}
	switch en {
	case syscall.ENOENT, syscall.ENOTDIR, syscall.ENAMETOOLONG, syscall.EINVAL, syscall.EISDIR:
		return true
	}
	return false
}

// openStaged opens a replacement of name (PUT, COPY's target): it is written
// to a staging file next to it and renamed over name by Close, only when
// the whole body arrived. Until then readers see the old content; a failed
// upload removes the staging file and leaves the old file as it was.
func (f fileSystem) openStaged(ctx context.Context, name string, exists bool) (xwebdav.File, error) {
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := path.Join(path.Dir(name), stagePrefix+hex.EncodeToString(rnd[:])+"-"+path.Base(name))
	if len(path.Base(tmp)) > 255 {
		tmp = path.Join(path.Dir(name), stagePrefix+hex.EncodeToString(rnd[:]))
	}
	h, err := f.v.Create(context.WithoutCancel(ctx), tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644, 0, 0)
	if err != nil {
		return nil, osErr("open", name, err)
	}
	body, _ := ctx.Value(putBodyKey{}).(*countedBody)
	return &stagedFile{file: file{v: f.v, h: h, name: tmp}, target: name, exists: exists, body: body}, nil
}

// stagePrefix starts the names of staging files; PROPFIND hides them.
const stagePrefix = ".kelp-put-"

type stagedFile struct {
	file
	target string
	exists bool
	body   *countedBody // the request body, when a PUT: Close checks it arrived whole
}

func (s *stagedFile) Close() error {
	ctx := context.Background()
	err := s.file.Close()
	if err == nil && s.body != nil {
		err = s.body.incomplete()
	}
	if err == nil && s.exists {
		err = s.keepProps(ctx)
	}
	if err == nil {
		err = osErr("rename", s.target, s.v.Rename(ctx, s.name, s.target, false))
	}
	if err != nil {
		s.v.Unlink(ctx, s.name)
	}
	return err
}

// keepProps carries the replaced file's dead properties (extended
// attributes) over to its new content, as writing in place did.
func (s *stagedFile) keepProps(ctx context.Context) error {
	keys, err := s.v.ListXattr(ctx, s.target)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return nil
		}
		return osErr("listxattr", s.target, err)
	}
	if len(keys) == 0 {
		return nil
	}
	set := make(map[string][]byte, len(keys))
	for _, k := range keys {
		v, err := s.v.GetXattr(ctx, s.target, k)
		if err != nil {
			continue // removed meanwhile
		}
		set[k] = v
	}
	return osErr("setxattr", s.name, s.v.PatchXattrs(ctx, s.name, set, nil))
}

// putBodyKey holds a PUT's countedBody in the request's context: x/net/webdav
// closes the file also when the copy failed, and Close checks the body
// arrived whole.
type putBodyKey struct{}
