package volumeserver

import "syscall"

// diskTotalBytes is the size of the file system holding dir.
func diskTotalBytes(dir string) (uint64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return st.Blocks * uint64(st.Bsize), true
}
