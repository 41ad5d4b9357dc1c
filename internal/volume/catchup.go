package volume

import (
	"fmt"

	"github.com/kelpfs/kelp/internal/needle"
)

// IndexEntry is one key of a volume's needle index, for comparing copies:
// two copies hold the same needle when key and size match.
type IndexEntry struct {
	Key     uint64
	Size    uint32 // body size; meaningless when Deleted
	Deleted bool   // the latest record of the key is a tombstone
}

// Index returns a snapshot of the needle index in key order: what a copy
// that is catching up compares with its own (see internal/volumeserver,
// catch-up). It holds the volume's read lock while copying, about 16 bytes
// per needle.
func (v *Volume) Index() ([]IndexEntry, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.closed {
		return nil, fmt.Errorf("volume %d: %w", v.cfg.ID, ErrClosed)
	}
	out := make([]IndexEntry, 0, v.idx.len())
	v.idx.ascend(func(key uint64, e indexEntry) bool {
		out = append(out, IndexEntry{Key: key, Size: e.size, Deleted: e.size == needle.TombstoneSize})
		return true
	})
	return out, nil
}

// ReadAny is Read without the cookie check, for copying a needle between
// copies of a volume; the Object's Meta carries the cookie.
func (v *Volume) ReadAny(key uint64) (*Object, error) {
	v.mu.RLock()
	if v.closed {
		v.mu.RUnlock()
		return nil, fmt.Errorf("volume %d: %w", v.cfg.ID, ErrClosed)
	}
	e, ok := v.idx.get(key)
	d := v.dat.acquire()
	v.mu.RUnlock()
	o, err := v.readEntryCookie(d, key, 0, false, e, ok)
	if err != nil || o.d == nil {
		d.release()
	}
	return o, err
}
