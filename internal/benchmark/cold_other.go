//go:build !linux

package benchmark

import "fmt"

// DropPageCache is only implemented on Linux.
func DropPageCache() error {
	return fmt.Errorf("benchmark: dropping the page cache is only implemented on Linux")
}

// CheckDropPageCache fails: DropPageCache would.
func CheckDropPageCache() error {
	return fmt.Errorf("%w: --cold drops the page cache, which is only implemented on Linux", ErrConfig)
}
