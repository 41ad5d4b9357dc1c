package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrCrashed is returned by every operation on a MemFS after it crashed: the
// process that used it is, by the test's fiction, dead.
var ErrCrashed = errors.New("vfs: file system crashed")

// FS is the set of file-system operations the volume engine needs.
type FS interface {
	// OpenFile opens or creates name with os.O_* flags, like os.OpenFile.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	Rename(oldname, newname string) error
	Remove(name string) error
	Stat(name string) (fs.FileInfo, error)
	// ReadDir returns the names in dir, sorted.
	ReadDir(dir string) ([]string, error)
	MkdirAll(dir string, perm fs.FileMode) error
	// SyncDir makes creates, renames and removes in dir durable.
	SyncDir(dir string) error
}

// File is an open file. ReadAt and WriteAt may be called concurrently.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Writer // writes at the handle's position (end of file with O_APPEND)
	io.Closer
	Truncate(size int64) error
	// Sync makes the file's data durable (fdatasync).
	Sync() error
	Size() (int64, error)
	Name() string
}

// WillNeeder is implemented by files that can start reading a range into
// memory ahead of the reads (posix_fadvise WILLNEED).
type WillNeeder interface {
	WillNeed(off, n int64)
}

// WillNeed asks f to start reading [off, off+n) in the background, when it
// can: the reads of a large needle that follow (its head, its trailer, its
// body in pieces) then find the bytes on their way in one disk read, where
// each would otherwise be a disk round trip of its own (a jump from head to
// trailer and back resets the kernel's read-ahead, which the concurrent
// readers of a volume file share). A hint: nothing fails.
func WillNeed(f File, off, n int64) {
	if w, ok := f.(WillNeeder); ok {
		w.WillNeed(off, n)
	}
}

// FreeSpacer is implemented by file systems that can report free bytes
// (statfs) under a directory.
type FreeSpacer interface {
	FreeBytes(dir string) (uint64, error)
}

// Open opens name read-only.
func Open(fsys FS, name string) (File, error) { return fsys.OpenFile(name, os.O_RDONLY, 0) }

// ReadFile reads the whole of name.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := Open(fsys, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !(errors.Is(err, io.EOF) && int64(n) == size) {
		return nil, err
	}
	return buf, nil
}

// WriteFileAtomic replaces name with data so that after a crash the file holds
// either the old or the new content: write a temporary file, sync it, rename
// it over name, sync the directory. perm is the new file's mode.
func WriteFileAtomic(fsys FS, name string, data []byte, perm os.FileMode) error {
	tmp := name + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, name); err != nil {
		return err
	}
	if err := fsys.SyncDir(filepath.Dir(name)); err != nil {
		return fmt.Errorf("vfs: sync dir of %s: %w", name, err)
	}
	return nil
}
