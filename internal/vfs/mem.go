package vfs

import (
	"io"
	"io/fs"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// MemFS is an in-memory FS. One mutex guards everything, which keeps the
// crash snapshot atomic; it is meant for tests, not speed.
type MemFS struct {
	mu      sync.Mutex
	files   map[string]*inode // current namespace
	dirs    map[string]bool
	durable map[string]*inode // namespace as of the last SyncDir (power-loss mode)

	powerLoss  bool
	rng        *rand.Rand
	garbage    bool // a written-back page may be torn
	dropAll    bool // every unsynced change is lost
	crashed    bool
	crashAfter int // crash automatically when this many more mutations have run; 0 = never
	afterCrash *MemFS
}

// The power-loss model works on pages and sectors, as a kernel's page cache
// and a disk do: a dirty page is written back whole or not at all (or, with
// Garbage, torn at a sector boundary), in any order; a sector is atomic.
const (
	pageSize   = 4096
	sectorSize = 512
)

type inode struct {
	data   []byte
	synced []byte           // durable content (power-loss mode)
	dirty  map[int]struct{} // pages changed since the last Sync (power-loss mode)
	mtime  time.Time
}

// NewMem returns an empty in-memory FS on which every write is immediately
// durable; Crash models kill -9.
func NewMem() *MemFS {
	return &MemFS{files: map[string]*inode{}, dirs: map[string]bool{"/": true, ".": true}}
}

// CrashOptions tune the power-loss model of NewCrash.
type CrashOptions struct {
	// Garbage lets a dirty page be written back only in part (a prefix of
	// its sectors), with the next sector holding random bytes if it never
	// held synced data, as when a write was cut off mid-sector.
	Garbage bool
	// DropUnsynced loses every change not yet synced (the worst case)
	// instead of a random subset of them; tests use it to make a loss certain.
	DropUnsynced bool
}

// NewCrash returns an in-memory FS that remembers what was synced, so Crash
// can produce the state after a power loss. seed makes the losses repeatable.
func NewCrash(seed int64, opt CrashOptions) *MemFS {
	m := NewMem()
	m.powerLoss = true
	m.rng = rand.New(rand.NewSource(seed))
	m.garbage = opt.Garbage
	m.dropAll = opt.DropUnsynced
	m.durable = map[string]*inode{}
	return m
}

// CrashAfter makes the FS crash by itself once n more mutating operations
// (write, truncate, sync, create, rename, remove) have run; the n-th does not
// happen. Crash then returns that state.
func (m *MemFS) CrashAfter(n int) {
	m.mu.Lock()
	m.crashAfter = n
	m.mu.Unlock()
}

// Crashed reports whether the FS has crashed.
func (m *MemFS) Crashed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.crashed
}

// Crash stops this FS (every later operation fails with ErrCrashed) and
// returns a new MemFS holding what survives; calling it again returns the
// same survivor.
//
// Without power loss (NewMem) everything written survives. With power loss
// (NewCrash):
//   - a directory entry (create, rename, remove) survives only if SyncDir ran
//     on its directory afterwards; otherwise the previous entry is restored.
//     Directories made by MkdirAll are always durable.
//   - a file keeps the content it had at its last Sync. Of the 4 KiB pages
//     changed since (written, or cut off or grown by Truncate), each is, at
//     random and independently, written back with its current content or
//     not at all — so unsynced data may be lost in the middle of the
//     unsynced region while later unsynced pages survive. With Garbage a
//     written-back page may be torn: only a prefix of its 512-byte sectors
//     is new, and the sector after that prefix is random bytes if it held
//     no synced data (synced sectors are never garbled: sector writes are
//     atomic).
//   - the file's length is its synced length, its current length, or (when
//     it grew) any length in between; bytes that no written-back page
//     covers read as the synced content, or zeros past the synced length.
//   - with DropUnsynced, a file is exactly its synced content.
func (m *MemFS) Crash() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.crashLocked()
	return m.afterCrash
}

func (m *MemFS) crashLocked() {
	if m.crashed {
		return
	}
	m.crashed = true
	n := NewMem()
	if m.powerLoss {
		n.powerLoss, n.rng, n.garbage, n.dropAll, n.durable = true, m.rng, m.garbage, m.dropAll, map[string]*inode{}
	}
	for d := range m.dirs {
		n.dirs[d] = true
	}
	names := m.files
	if m.powerLoss {
		names = m.durable
	}
	done := map[*inode]*inode{}
	keys := make([]string, 0, len(names))
	for k := range names {
		keys = append(keys, k)
	}
	sort.Strings(keys) // deterministic use of rng
	for _, name := range keys {
		ino := names[name]
		s, ok := done[ino]
		if !ok {
			s = &inode{data: m.survivor(ino), mtime: ino.mtime}
			s.synced = append([]byte(nil), s.data...)
			if m.powerLoss {
				s.dirty = map[int]struct{}{}
			}
			done[ino] = s
		}
		n.files[name] = s
		if n.durable != nil {
			n.durable[name] = s
		}
	}
	m.afterCrash = n
}

func (m *MemFS) survivor(ino *inode) []byte {
	if !m.powerLoss {
		return append([]byte(nil), ino.data...)
	}
	if m.dropAll {
		return append([]byte(nil), ino.synced...)
	}
	size := len(ino.synced)
	if lo, hi := min(len(ino.synced), len(ino.data)), max(len(ino.synced), len(ino.data)); lo != hi {
		switch m.rng.Intn(3) {
		case 0: // the length change was lost
		case 1:
			size = len(ino.data)
		default:
			if len(ino.data) > len(ino.synced) { // grown: written back part way
				size = lo + m.rng.Intn(hi-lo+1)
			} else {
				size = len(ino.data)
			}
		}
	}
	out := make([]byte, size)
	copy(out, ino.synced)
	pages := make([]int, 0, len(ino.dirty))
	for p := range ino.dirty {
		pages = append(pages, p)
	}
	sort.Ints(pages) // deterministic use of rng
	for _, p := range pages {
		start, end := p*pageSize, min((p+1)*pageSize, size)
		if start >= end || m.rng.Intn(2) == 0 {
			continue // not written back
		}
		torn := -1
		if m.garbage && m.rng.Intn(4) == 0 {
			torn = start + m.rng.Intn(pageSize/sectorSize)*sectorSize
			end = min(end, torn)
		}
		for i := start; i < end; i++ {
			out[i] = 0
			if i < len(ino.data) {
				out[i] = ino.data[i]
			}
		}
		if torn >= 0 && torn < size && torn >= len(ino.synced) {
			m.rng.Read(out[torn:min(torn+sectorSize, size)])
		}
	}
	return out
}

// mutate is called, with mu held, before every mutating operation.
func (m *MemFS) mutate() error {
	if m.crashed {
		return ErrCrashed
	}
	if m.crashAfter > 0 {
		m.crashAfter--
		if m.crashAfter == 0 {
			m.crashLocked()
			return ErrCrashed
		}
	}
	return nil
}

func clean(name string) string { return filepath.Clean(name) }

func pathErr(op, name string, err error) error { return &fs.PathError{Op: op, Path: name, Err: err} }

func (m *MemFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.crashed {
		return nil, pathErr("open", name, ErrCrashed)
	}
	ino, ok := m.files[name]
	switch {
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, pathErr("open", name, fs.ErrExist)
	case !ok && flag&os.O_CREATE == 0:
		return nil, pathErr("open", name, fs.ErrNotExist)
	case !ok:
		if !m.dirs[filepath.Dir(name)] {
			return nil, pathErr("open", name, fs.ErrNotExist)
		}
		if err := m.mutate(); err != nil {
			return nil, pathErr("open", name, err)
		}
		ino = &inode{mtime: time.Now()}
		if m.powerLoss {
			ino.dirty = map[int]struct{}{}
		}
		m.files[name] = ino
	}
	if ok && flag&os.O_TRUNC != 0 {
		if err := m.mutate(); err != nil {
			return nil, pathErr("open", name, err)
		}
		ino.truncate(0)
	}
	return &memFile{fs: m, ino: ino, name: name, flag: flag}, nil
}

func (m *MemFS) Rename(oldname, newname string) error {
	oldname, newname = clean(oldname), clean(newname)
	m.mu.Lock()
	defer m.mu.Unlock()
	ino, ok := m.files[oldname]
	if !ok {
		return pathErr("rename", oldname, fs.ErrNotExist)
	}
	if err := m.mutate(); err != nil {
		return pathErr("rename", oldname, err)
	}
	delete(m.files, oldname)
	m.files[newname] = ino
	return nil
}

func (m *MemFS) Remove(name string) error {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.files[name]; !ok {
		if m.dirs[name] {
			for f := range m.files {
				if filepath.Dir(f) == name {
					return pathErr("remove", name, fs.ErrExist)
				}
			}
			delete(m.dirs, name)
			return nil
		}
		return pathErr("remove", name, fs.ErrNotExist)
	}
	if err := m.mutate(); err != nil {
		return pathErr("remove", name, err)
	}
	delete(m.files, name)
	return nil
}

func (m *MemFS) Stat(name string) (fs.FileInfo, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.crashed {
		return nil, pathErr("stat", name, ErrCrashed)
	}
	if ino, ok := m.files[name]; ok {
		return memInfo{name: filepath.Base(name), size: int64(len(ino.data)), mtime: ino.mtime}, nil
	}
	if m.dirs[name] {
		return memInfo{name: filepath.Base(name), dir: true}, nil
	}
	return nil, pathErr("stat", name, fs.ErrNotExist)
}

func (m *MemFS) ReadDir(dir string) ([]string, error) {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.crashed {
		return nil, pathErr("readdir", dir, ErrCrashed)
	}
	if !m.dirs[dir] {
		return nil, pathErr("readdir", dir, fs.ErrNotExist)
	}
	var names []string
	for f := range m.files {
		if filepath.Dir(f) == dir {
			names = append(names, filepath.Base(f))
		}
	}
	for d := range m.dirs {
		if d != dir && filepath.Dir(d) == dir {
			names = append(names, filepath.Base(d))
		}
	}
	sort.Strings(names)
	return names, nil
}

func (m *MemFS) MkdirAll(dir string, perm fs.FileMode) error {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.crashed {
		return pathErr("mkdir", dir, ErrCrashed)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, ok := m.files[d]; ok {
			return pathErr("mkdir", d, fs.ErrExist)
		}
		m.dirs[d] = true
		if d == filepath.Dir(d) {
			break
		}
	}
	return nil
}

func (m *MemFS) SyncDir(dir string) error {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.mutate(); err != nil {
		return pathErr("syncdir", dir, err)
	}
	if !m.dirs[dir] {
		return pathErr("syncdir", dir, fs.ErrNotExist)
	}
	if m.durable == nil {
		return nil
	}
	for name := range m.durable {
		if filepath.Dir(name) == dir {
			delete(m.durable, name)
		}
	}
	for name, ino := range m.files {
		if filepath.Dir(name) == dir {
			m.durable[name] = ino
		}
	}
	return nil
}

// Names lists every file, for test diagnostics.
func (m *MemFS) Names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for n := range m.files {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

type memInfo struct {
	name  string
	size  int64
	mtime time.Time
	dir   bool
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) ModTime() time.Time { return i.mtime }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }
func (i memInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}

// markDirty records that bytes [from, to) changed since the last Sync.
func (ino *inode) markDirty(from, to int) {
	if ino.dirty == nil {
		return // not tracked: everything is durable at once
	}
	for p := from / pageSize; p*pageSize < to; p++ {
		ino.dirty[p] = struct{}{}
	}
}

func (ino *inode) truncate(size int) {
	ino.markDirty(min(size, len(ino.data)), max(size, len(ino.data)))
	if size < len(ino.data) {
		ino.data = ino.data[:size]
	} else {
		ino.data = append(ino.data, make([]byte, size-len(ino.data))...)
	}
	ino.mtime = time.Now()
}

func (ino *inode) writeAt(p []byte, off int) {
	ino.markDirty(min(off, len(ino.data)), off+len(p)) // a hole before off is new zeros
	if end := off + len(p); end > len(ino.data) {
		if end > cap(ino.data) {
			grown := make([]byte, len(ino.data), max(end, 2*cap(ino.data)))
			copy(grown, ino.data)
			ino.data = grown
		}
		old := len(ino.data)
		ino.data = ino.data[:end]
		if off > old {
			clear(ino.data[old:off]) // capacity may hold bytes from before a truncate
		}
	}
	copy(ino.data[off:], p)
	ino.mtime = time.Now()
}

// sync makes the current content the durable one.
func (ino *inode) sync() {
	if ino.dirty == nil {
		return
	}
	if len(ino.synced) > len(ino.data) {
		ino.synced = ino.synced[:len(ino.data)]
	} else {
		ino.synced = append(ino.synced, ino.data[len(ino.synced):]...)
	}
	for p := range ino.dirty {
		start := p * pageSize
		if start < len(ino.data) {
			copy(ino.synced[start:], ino.data[start:min(start+pageSize, len(ino.data))])
		}
	}
	clear(ino.dirty)
}

type memFile struct {
	fs     *MemFS
	ino    *inode
	name   string
	flag   int
	pos    int64
	closed bool
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) check(op string, write bool) error {
	if f.closed {
		return pathErr(op, f.name, fs.ErrClosed)
	}
	if f.fs.crashed {
		return pathErr(op, f.name, ErrCrashed)
	}
	if write && f.flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		return pathErr(op, f.name, fs.ErrPermission)
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("read", f.name, fs.ErrInvalid)
	}
	if off >= int64(len(f.ino.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.ino.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("write", f.name, fs.ErrInvalid)
	}
	if err := f.fs.mutate(); err != nil {
		return 0, pathErr("write", f.name, err)
	}
	f.ino.writeAt(p, int(off))
	return len(p), nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if err := f.fs.mutate(); err != nil {
		return 0, pathErr("write", f.name, err)
	}
	if f.flag&os.O_APPEND != 0 {
		f.pos = int64(len(f.ino.data))
	}
	f.ino.writeAt(p, int(f.pos))
	f.pos += int64(len(p))
	return len(p), nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if err := f.fs.mutate(); err != nil {
		return pathErr("truncate", f.name, err)
	}
	f.ino.truncate(int(size))
	return nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync", false); err != nil {
		return err
	}
	if err := f.fs.mutate(); err != nil {
		return pathErr("sync", f.name, err)
	}
	f.ino.sync()
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("stat", false); err != nil {
		return 0, err
	}
	return int64(len(f.ino.data)), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, fs.ErrClosed)
	}
	f.closed = true
	return nil
}

// Snapshot returns an independent copy of the FS as it is now, synced state
// included, without crashing it. Tests use it to try many failures from one
// starting point.
func (m *MemFS) Snapshot() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := NewMem()
	if m.powerLoss {
		n.powerLoss, n.garbage, n.dropAll, n.durable = true, m.garbage, m.dropAll, map[string]*inode{}
		n.rng = rand.New(rand.NewSource(m.rng.Int63()))
	}
	for d := range m.dirs {
		n.dirs[d] = true
	}
	copies := map[*inode]*inode{}
	dup := func(ino *inode) *inode {
		if c, ok := copies[ino]; ok {
			return c
		}
		c := &inode{data: append([]byte(nil), ino.data...), synced: append([]byte(nil), ino.synced...), mtime: ino.mtime}
		if ino.dirty != nil {
			c.dirty = maps.Clone(ino.dirty)
		}
		copies[ino] = c
		return c
	}
	for name, ino := range m.files {
		n.files[name] = dup(ino)
	}
	for name, ino := range m.durable {
		n.durable[name] = dup(ino)
	}
	return n
}
