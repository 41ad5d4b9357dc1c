// Package pebbletest helps tests of what is built on the Pebble store see
// the moment between a commit becoming visible and its WAL sync returning:
// Pebble shows a commit to readers before its fsync ends, and a durability
// promise is broken exactly there. Only tests import it.
package pebbletest

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// StallFS is a Pebble file system whose WAL syncs (files ending in ".log")
// wait while a stall is on; everything else passes through to the FS below,
// typically vfs.NewCrashableMem() so that a test can then cut the power.
type StallFS struct {
	vfs.FS
	gate    atomic.Pointer[chan struct{}]
	stalled atomic.Int32 // syncs waiting right now
}

// NewStallFS wraps fs.
func NewStallFS(fs vfs.FS) *StallFS { return &StallFS{FS: fs} }

// Stall makes every WAL sync from now on wait until release is called
// (more than once is fine).
func (f *StallFS) Stall() (release func()) {
	gate := make(chan struct{})
	f.gate.Store(&gate)
	return sync.OnceFunc(func() { close(gate) })
}

// Stalled reports how many WAL syncs are waiting now.
func (f *StallFS) Stalled() int { return int(f.stalled.Load()) }

func (f *StallFS) wait() {
	if g := f.gate.Load(); g != nil {
		f.stalled.Add(1)
		<-*g
		f.stalled.Add(-1)
	}
}

func (f *StallFS) wrap(name string, file vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return file, err
	}
	return &stallFile{File: file, fs: f}, nil
}

func (f *StallFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, c)
	return f.wrap(name, file, err)
}

func (f *StallFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.ReuseForWrite(oldname, newname, c)
	return f.wrap(newname, file, err)
}

type stallFile struct {
	vfs.File
	fs *StallFS
}

func (f *stallFile) Sync() error     { f.fs.wait(); return f.File.Sync() }
func (f *stallFile) SyncData() error { f.fs.wait(); return f.File.SyncData() }
func (f *stallFile) SyncTo(n int64) (bool, error) {
	f.fs.wait()
	return f.File.SyncTo(n)
}
