package vfs

import (
	"io/fs"
	"os"
	"sort"
)

// OS returns the real operating-system file system.
func OS() FS { return osFS{} }

type osFS struct{}

type osFile struct{ *os.File }

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Rename(o, n string) error                 { return os.Rename(o, n) }
func (osFS) Remove(name string) error                 { return os.Remove(name) }
func (osFS) Stat(name string) (fs.FileInfo, error)    { return os.Stat(name) }
func (osFS) MkdirAll(dir string, p fs.FileMode) error { return os.MkdirAll(dir, p) }

func (osFS) ReadDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (osFS) FreeBytes(dir string) (uint64, error) { return freeBytes(dir) }

func (f osFile) Sync() error { return datasync(f.File) }

func (f osFile) Size() (int64, error) {
	st, err := f.File.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}
