package vfs

import (
	"io/fs"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Op names an operation FaultFS can fail or count.
type Op string

// Operations FaultFS understands.
const (
	OpOpen     Op = "open"
	OpRead     Op = "read"  // File.ReadAt
	OpWrite    Op = "write" // File.Write and File.WriteAt
	OpTruncate Op = "truncate"
	OpSync     Op = "sync"
	OpSyncDir  Op = "syncdir"
	OpRename   Op = "rename"
	OpRemove   Op = "remove"
)

// Fault describes operations to fail.
type Fault struct {
	Op   Op
	Path string // fail only paths containing this; "" matches all
	Skip int    // let this many matching operations succeed first
	// Times is how many matching operations fail after Skip; 0 means all.
	Times int
	// Err is the error returned; nil means ENOSPC, unless Delay or Block is set.
	Err error
	// Delay makes matching operations sleep first (a slow disk). With Err
	// unset, the operation then proceeds normally.
	Delay time.Duration
	// Short makes a failing write store the first half of its bytes before
	// returning Err, like a disk that filled up mid-write.
	Short bool
	// Block makes matching operations wait until it is closed (a disk that
	// stalls until the test says so). With Err unset, the operation then
	// proceeds normally.
	Block <-chan struct{}
}

// FaultFS wraps an FS and fails operations as told. It is safe for
// concurrent use.
type FaultFS struct {
	inner  FS
	mu     sync.Mutex
	faults []*Fault
	counts map[Op]int
}

// NewFaulty wraps inner.
func NewFaulty(inner FS) *FaultFS { return &FaultFS{inner: inner, counts: map[Op]int{}} }

// Inject adds a fault.
func (f *FaultFS) Inject(fl Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl.Err == nil && fl.Delay == 0 && fl.Block == nil {
		fl.Err = syscall.ENOSPC
	}
	f.faults = append(f.faults, &fl)
}

// Clear removes every fault ("space has come back").
func (f *FaultFS) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = nil
}

// Count returns how many times op was called (failed calls included).
func (f *FaultFS) Count(op Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[op]
}

// ResetCounts zeroes all counters.
func (f *FaultFS) ResetCounts() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts = map[Op]int{}
}

// check counts op, applies any delay, and returns the failure to apply, if any.
func (f *FaultFS) check(op Op, name string) *Fault {
	fl := f.match(op, name)
	if fl == nil {
		return nil
	}
	delay(fl.Delay)
	if fl.Block != nil {
		<-fl.Block
	}
	if fl.Err == nil {
		return nil
	}
	return fl
}

func (f *FaultFS) match(op Op, name string) *Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts[op]++
	for i, fl := range f.faults {
		if fl.Op != op || !strings.Contains(name, fl.Path) {
			continue
		}
		if fl.Skip > 0 {
			fl.Skip--
			continue
		}
		if fl.Times > 0 {
			fl.Times--
			if fl.Times == 0 {
				f.faults = append(f.faults[:i:i], f.faults[i+1:]...)
			}
		}
		return fl
	}
	return nil
}

func (f *FaultFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	if fl := f.check(OpOpen, name); fl != nil {
		return nil, pathErr("open", name, fl.Err)
	}
	file, err := f.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

func (f *FaultFS) Rename(o, n string) error {
	if fl := f.check(OpRename, o); fl != nil {
		return pathErr("rename", o, fl.Err)
	}
	return f.inner.Rename(o, n)
}

func (f *FaultFS) Remove(name string) error {
	if fl := f.check(OpRemove, name); fl != nil {
		return pathErr("remove", name, fl.Err)
	}
	return f.inner.Remove(name)
}

func (f *FaultFS) SyncDir(dir string) error {
	if fl := f.check(OpSyncDir, dir); fl != nil {
		return pathErr("syncdir", dir, fl.Err)
	}
	return f.inner.SyncDir(dir)
}

func (f *FaultFS) Stat(name string) (fs.FileInfo, error)    { return f.inner.Stat(name) }
func (f *FaultFS) ReadDir(dir string) ([]string, error)     { return f.inner.ReadDir(dir) }
func (f *FaultFS) MkdirAll(dir string, p fs.FileMode) error { return f.inner.MkdirAll(dir, p) }

// FreeBytes passes through to the wrapped FS when it supports it.
func (f *FaultFS) FreeBytes(dir string) (uint64, error) {
	if fsp, ok := f.inner.(FreeSpacer); ok {
		return fsp.FreeBytes(dir)
	}
	return 0, pathErr("statfs", dir, syscall.ENOTSUP)
}

type faultFile struct {
	File
	fs *FaultFS
}

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if fl := f.fs.check(OpRead, f.Name()); fl != nil {
		return 0, pathErr("read", f.Name(), fl.Err)
	}
	return f.File.ReadAt(p, off)
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if fl := f.fs.check(OpWrite, f.Name()); fl != nil {
		if fl.Short && len(p) > 1 {
			n, _ := f.File.WriteAt(p[:len(p)/2], off)
			return n, pathErr("write", f.Name(), fl.Err)
		}
		return 0, pathErr("write", f.Name(), fl.Err)
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) Write(p []byte) (int, error) {
	if fl := f.fs.check(OpWrite, f.Name()); fl != nil {
		if fl.Short && len(p) > 1 {
			n, _ := f.File.Write(p[:len(p)/2])
			return n, pathErr("write", f.Name(), fl.Err)
		}
		return 0, pathErr("write", f.Name(), fl.Err)
	}
	return f.File.Write(p)
}

func (f *faultFile) Truncate(size int64) error {
	if fl := f.fs.check(OpTruncate, f.Name()); fl != nil {
		return pathErr("truncate", f.Name(), fl.Err)
	}
	return f.File.Truncate(size)
}

func (f *faultFile) Sync() error {
	if fl := f.fs.check(OpSync, f.Name()); fl != nil {
		return pathErr("sync", f.Name(), fl.Err)
	}
	return f.File.Sync()
}

// delay waits d. Below a millisecond it yields in a loop instead of sleeping,
// because a Go timer that short may fire a millisecond late on an idle
// processor, which would make a simulated fast disk look slow.
func delay(d time.Duration) {
	if d >= time.Millisecond {
		time.Sleep(d)
		return
	}
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		runtime.Gosched()
	}
}
