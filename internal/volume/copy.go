package volume

import (
	"fmt"
	"io"

	"github.com/kelpfs/kelp/internal/replication"
)

// SetReplication rewrites the replication code in the superblock and syncs it.
// The superblock is 32 bytes at offset 0, inside one disk sector, so the
// in-place rewrite is atomic on the devices Kelp runs on; its CRC catches the rest.
func (v *Volume) SetReplication(code replication.Code) error {
	v.appendMu.Lock()
	defer v.appendMu.Unlock()
	v.mu.Lock()
	if err := v.writableLocked(); err != nil && v.closed {
		v.mu.Unlock()
		return fmt.Errorf("volume %d: set replication: %w", v.cfg.ID, err)
	}
	if v.vacuuming {
		v.mu.Unlock()
		return fmt.Errorf("volume %d: set replication: %w", v.cfg.ID, ErrVacuumRunning)
	}
	sb := v.sb
	sb.Replication = code
	dat := v.dat.acquire()
	v.mu.Unlock()
	defer dat.release()
	if _, err := dat.f.WriteAt(sb.Marshal(), 0); err != nil {
		return fmt.Errorf("volume %d: set replication: %w", v.cfg.ID, noSpace(err))
	}
	if err := dat.f.Sync(); err != nil {
		return fmt.Errorf("volume %d: set replication: %w", v.cfg.ID, err)
	}
	v.mu.Lock()
	v.sb = sb
	v.mu.Unlock()
	return nil
}

// OpenData returns the volume's .dat as it is now: a reader over its first size
// bytes, which later appends and a vacuum switch do not disturb, and a release
// function the caller must call when done. The .dat alone is enough to rebuild
// the volume (the index is derived from it), so it is what a copy transfers.
func (v *Volume) OpenData() (r io.ReaderAt, size int64, release func(), err error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.closed {
		return nil, 0, nil, fmt.Errorf("volume %d: %w", v.cfg.ID, ErrClosed)
	}
	dat := v.dat.acquire()
	return dat.f, v.tail, dat.release, nil
}
