package needle

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Index record layout.
const (
	IndexEntrySize = 16
	// TombstoneSize in an index record's size field marks a delete.
	TombstoneSize uint32 = math.MaxUint32
	// MaxOffset is the largest byte offset an index record can hold.
	MaxOffset int64 = math.MaxUint32 * Align
)

// IndexEntry is one index record.
type IndexEntry struct {
	Key    uint64
	Offset int64  // bytes, a multiple of Align
	Size   uint32 // body size, or TombstoneSize
}

// IsTombstone reports whether the entry records a delete.
func (e IndexEntry) IsTombstone() bool { return e.Size == TombstoneSize }

// AppendIndex appends the 16-byte encoding of e.
func AppendIndex(dst []byte, e IndexEntry) []byte {
	dst = binary.BigEndian.AppendUint64(dst, e.Key)
	dst = binary.BigEndian.AppendUint32(dst, uint32(e.Offset/Align))
	return binary.BigEndian.AppendUint32(dst, e.Size)
}

// ParseIndex decodes one index record.
func ParseIndex(b []byte) (IndexEntry, error) {
	if len(b) < IndexEntrySize {
		return IndexEntry{}, fmt.Errorf("%w: short index record (%d bytes)", ErrCorrupt, len(b))
	}
	e := IndexEntry{
		Key:    binary.BigEndian.Uint64(b),
		Offset: int64(binary.BigEndian.Uint32(b[8:])) * Align,
		Size:   binary.BigEndian.Uint32(b[12:]),
	}
	if e.Size != TombstoneSize && e.Size > MaxBodySize {
		return e, fmt.Errorf("%w: index size %d", ErrCorrupt, e.Size)
	}
	return e, nil
}
