//go:build !linux

package volumeserver

// diskTotalBytes is unknown on this platform.
func diskTotalBytes(string) (uint64, bool) { return 0, false }
