//go:build !linux

package vfs

import (
	"errors"
	"os"
)

func datasync(f *os.File) error { return f.Sync() }

func freeBytes(dir string) (uint64, error) {
	return 0, errors.New("vfs: free space not supported on this platform")
}

// WillNeed is a no-op here.
func (f osFile) WillNeed(off, n int64) {}
