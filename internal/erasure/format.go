package erasure

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/kelpfs/kelp/internal/needle"
)

// File formats (all integers big-endian, checksums CRC32C); see doc.go.
const (
	formatVersion    = 1
	shardFooterSize  = 40
	indexHeaderSize  = 64
	journalEntrySize = 12
)

var (
	shardMagic = [4]byte{'K', 'E', 'C', 'S'}
	indexMagic = [4]byte{'K', 'E', 'C', 'X'}
)

// ShardFooter ends every shard file and describes the shard.
type ShardFooter struct {
	Shard    int
	Scheme   Scheme
	Layout   Layout
	VolumeID uint32
	TableCRC uint32 // CRC32C of the block checksum table
}

func (f ShardFooter) marshal() []byte {
	b := make([]byte, 0, shardFooterSize)
	b = append(b, shardMagic[:]...)
	b = append(b, formatVersion, byte(f.Shard), byte(f.Scheme.Data), byte(f.Scheme.Parity))
	b = binary.BigEndian.AppendUint64(b, uint64(f.Layout.ShardSize))
	b = binary.BigEndian.AppendUint64(b, uint64(f.Layout.DatSize))
	b = binary.BigEndian.AppendUint32(b, f.VolumeID)
	b = binary.BigEndian.AppendUint32(b, f.TableCRC)
	b = binary.BigEndian.AppendUint32(b, 0)
	return binary.BigEndian.AppendUint32(b, needle.CRC(b))
}

func parseShardFooter(b []byte) (ShardFooter, error) {
	if len(b) != shardFooterSize || [4]byte(b[:4]) != shardMagic {
		return ShardFooter{}, fmt.Errorf("%w: not a shard footer", ErrCorrupt)
	}
	if got, want := needle.CRC(b[:36]), binary.BigEndian.Uint32(b[36:]); got != want {
		return ShardFooter{}, fmt.Errorf("%w: shard footer checksum %08x, stored %08x", ErrCorrupt, got, want)
	}
	if b[4] != formatVersion {
		return ShardFooter{}, fmt.Errorf("%w: shard format version %d", ErrCorrupt, b[4])
	}
	s := Scheme{Data: int(b[6]), Parity: int(b[7])}
	if err := s.Validate(); err != nil {
		return ShardFooter{}, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	f := ShardFooter{Shard: int(b[5]), Scheme: s, VolumeID: binary.BigEndian.Uint32(b[24:]), TableCRC: binary.BigEndian.Uint32(b[28:])}
	f.Layout = Layout{Scheme: s, ShardSize: int64(binary.BigEndian.Uint64(b[8:])), DatSize: int64(binary.BigEndian.Uint64(b[16:]))}
	if f.Shard >= s.Total() || f.Layout.ShardSize <= 0 || f.Layout.ShardSize%BlockSize != 0 ||
		f.Layout != NewLayout(s, f.Layout.DatSize) {
		return ShardFooter{}, fmt.Errorf("%w: shard footer describes an impossible layout", ErrCorrupt)
	}
	return f, nil
}

// ShardFileSize is the size of a complete shard file of layout l.
func ShardFileSize(l Layout) int64 { return l.ShardSize + 4*l.Blocks() + shardFooterSize }

// Index is an EC volume's description and its needle index: what every
// shard holder needs to find a needle (see doc.go for the .ecx format).
type Index struct {
	Layout     Layout
	Superblock []byte // the volume's 32-byte superblock
	// Entries are the live needles, sorted by key; Offset is in the .dat.
	Entries []needle.IndexEntry
}

// Find returns key's entry.
func (x *Index) Find(key uint64) (needle.IndexEntry, bool) {
	i, ok := slices.BinarySearchFunc(x.Entries, key, func(e needle.IndexEntry, k uint64) int {
		switch {
		case e.Key < k:
			return -1
		case e.Key > k:
			return 1
		}
		return 0
	})
	if !ok {
		return needle.IndexEntry{}, false
	}
	return x.Entries[i], true
}

// Marshal encodes the index as a .ecx file.
func (x *Index) Marshal() []byte {
	b := make([]byte, 0, indexHeaderSize+len(x.Entries)*needle.IndexEntrySize+4)
	b = append(b, indexMagic[:]...)
	b = append(b, formatVersion, byte(x.Layout.Scheme.Data), byte(x.Layout.Scheme.Parity), 0)
	b = binary.BigEndian.AppendUint64(b, uint64(x.Layout.DatSize))
	b = binary.BigEndian.AppendUint64(b, uint64(x.Layout.ShardSize))
	b = binary.BigEndian.AppendUint64(b, uint64(len(x.Entries)))
	sb := make([]byte, needle.SuperblockSize)
	copy(sb, x.Superblock)
	b = append(b, sb...)
	for _, e := range x.Entries {
		b = needle.AppendIndex(b, e)
	}
	return binary.BigEndian.AppendUint32(b, needle.CRC(b))
}

// ParseIndex decodes and verifies a .ecx file.
func ParseIndex(b []byte) (*Index, error) {
	if len(b) < indexHeaderSize+4 || [4]byte(b[:4]) != indexMagic {
		return nil, fmt.Errorf("%w: not an EC index", ErrCorrupt)
	}
	body := b[:len(b)-4]
	if got, want := needle.CRC(body), binary.BigEndian.Uint32(b[len(b)-4:]); got != want {
		return nil, fmt.Errorf("%w: EC index checksum %08x, stored %08x", ErrCorrupt, got, want)
	}
	if b[4] != formatVersion {
		return nil, fmt.Errorf("%w: EC index version %d", ErrCorrupt, b[4])
	}
	s := Scheme{Data: int(b[5]), Parity: int(b[6])}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	l := Layout{Scheme: s, DatSize: int64(binary.BigEndian.Uint64(b[8:])), ShardSize: int64(binary.BigEndian.Uint64(b[16:]))}
	if l.DatSize < 0 || l != NewLayout(s, l.DatSize) {
		return nil, fmt.Errorf("%w: EC index describes an impossible layout", ErrCorrupt)
	}
	n := binary.BigEndian.Uint64(b[24:])
	if uint64(len(body)-indexHeaderSize) != n*needle.IndexEntrySize {
		return nil, fmt.Errorf("%w: EC index holds %d bytes for %d entries", ErrCorrupt, len(body)-indexHeaderSize, n)
	}
	x := &Index{Layout: l, Superblock: append([]byte(nil), b[32:64]...), Entries: make([]needle.IndexEntry, 0, n)}
	for p := indexHeaderSize; p < len(body); p += needle.IndexEntrySize {
		e, err := needle.ParseIndex(body[p:])
		if err != nil {
			return nil, err
		}
		if e.IsTombstone() || e.Offset+needle.RecordSize(e.Size) > l.DatSize {
			return nil, fmt.Errorf("%w: EC index entry %x outside the volume", ErrCorrupt, e.Key)
		}
		if k := len(x.Entries); k > 0 && x.Entries[k-1].Key >= e.Key {
			return nil, fmt.Errorf("%w: EC index not sorted at %x", ErrCorrupt, e.Key)
		}
		x.Entries = append(x.Entries, e)
	}
	return x, nil
}

// AppendJournal appends one delete record for key to a .ecj journal.
func AppendJournal(dst []byte, key uint64) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, key)
	return binary.BigEndian.AppendUint32(dst, needle.CRC(dst[start:]))
}

// ParseJournal decodes a .ecj journal: the deleted keys, and the length of
// its intact prefix. A torn or damaged record ends it (it was never
// acknowledged: a delete is answered only after its record is synced).
func ParseJournal(b []byte) (keys []uint64, valid int) {
	for valid+journalEntrySize <= len(b) {
		r := b[valid : valid+journalEntrySize]
		if needle.CRC(r[:8]) != binary.BigEndian.Uint32(r[8:]) {
			break
		}
		keys = append(keys, binary.BigEndian.Uint64(r))
		valid += journalEntrySize
	}
	return keys, valid
}

// RouteSize is the encoded size of one Route.
const RouteSize = 9

// MaxRoutes bounds a route table; a volume whose keys alternate between
// shards more often than this has none (readers then ask any holder).
const MaxRoutes = 1 << 16

// Route says: needles with keys from FirstKey up to the next route's
// FirstKey start in data shard Shard.
type Route struct {
	FirstKey uint64
	Shard    uint8
}

// Routes is the volume's route table: the runs of keys, in key order, whose
// records start in the same data shard. Keys are handed out in increasing
// order and records appended in time order, so a volume has about k runs
// plus a few where concurrent writers interleave. A client holding it sends
// a read straight to the holder of the needle's data shard. nil when the
// table would exceed MaxRoutes.
func (x *Index) Routes() []Route {
	var out []Route
	for _, e := range x.Entries {
		shard := uint8(e.Offset / x.Layout.ShardSize)
		if len(out) == 0 || out[len(out)-1].Shard != shard {
			if len(out) == MaxRoutes {
				return nil
			}
			out = append(out, Route{FirstKey: e.Key, Shard: shard})
		}
	}
	return out
}

// AppendRoutes encodes routes: 9 bytes each, key u64 then shard u8.
func AppendRoutes(dst []byte, routes []Route) []byte {
	for _, r := range routes {
		dst = binary.BigEndian.AppendUint64(dst, r.FirstKey)
		dst = append(dst, r.Shard)
	}
	return dst
}
