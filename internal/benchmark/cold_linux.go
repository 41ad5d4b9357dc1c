package benchmark

import (
	"fmt"
	"os"
	"syscall"
)

// dropCachesFile is the kernel's switch: writing "1" frees the clean page
// cache (not dentries and inodes, which a volume server barely uses).
const dropCachesFile = "/proc/sys/vm/drop_caches"

// DropPageCache writes every dirty page back (sync(2): the kernel only drops
// clean pages) and empties the page cache of the machine it runs on, so
// that the volume servers on this machine read needles from disk again. It
// needs root (CAP_SYS_ADMIN) and a writable /proc/sys.
func DropPageCache() error {
	syscall.Sync()
	if err := os.WriteFile(dropCachesFile, []byte("1\n"), 0); err != nil {
		return fmt.Errorf("benchmark: dropping the page cache needs root on Linux: %w", err)
	}
	return nil
}

// CheckDropPageCache fails, without dropping anything, when DropPageCache
// would: a run should not write N files to learn that it cannot read them
// cold.
func CheckDropPageCache() error {
	f, err := os.OpenFile(dropCachesFile, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("%w: --cold drops the page cache, which needs root on Linux: %w", ErrConfig, err)
	}
	return f.Close()
}
