package vfs

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// WillNeed starts the read of [off, off+n) into the page cache.
func (f osFile) WillNeed(off, n int64) {
	unix.Fadvise(int(f.Fd()), off, n, unix.FADV_WILLNEED)
}

// datasync uses fdatasync: the volume engine only needs data and size durable,
// not timestamps, and it is measurably cheaper than fsync.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}

func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	return st.Bavail * uint64(st.Bsize), nil
}
