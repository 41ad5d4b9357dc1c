package erasure

import "fmt"

// BlockSize is the unit of shard checksums: every BlockSize bytes of a shard
// have their own CRC32C, and shard sizes are multiples of it.
const BlockSize = 4096

// Layout maps a volume's .dat bytes to shards (see doc.go).
type Layout struct {
	Scheme    Scheme
	DatSize   int64 // bytes of the .dat that was encoded
	ShardSize int64 // bytes of data in every shard, a multiple of BlockSize
}

// NewLayout is the layout of a .dat of datSize bytes under scheme s.
func NewLayout(s Scheme, datSize int64) Layout {
	per := (datSize + int64(s.Data) - 1) / int64(s.Data)
	per = (per + BlockSize - 1) / BlockSize * BlockSize
	if per == 0 {
		per = BlockSize
	}
	return Layout{Scheme: s, DatSize: datSize, ShardSize: per}
}

// Blocks is the number of checksum blocks in each shard.
func (l Layout) Blocks() int64 { return l.ShardSize / BlockSize }

// Extent is a contiguous piece of one data shard.
type Extent struct {
	Shard  int   // data shard index
	Off    int64 // offset within the shard
	Len    int64
	DatOff int64 // where the piece sits in the .dat
}

// Locate returns the pieces of data shards that hold .dat bytes [off, off+n),
// in .dat order. A range inside one shard (the common case for a needle) is
// one extent.
func (l Layout) Locate(off, n int64) ([]Extent, error) {
	if off < 0 || n < 0 || off+n > l.DatSize {
		return nil, fmt.Errorf("%w: range %d+%d outside the %d-byte volume", ErrCorrupt, off, n, l.DatSize)
	}
	var out []Extent
	for n > 0 {
		shard := off / l.ShardSize
		in := off % l.ShardSize
		take := min(n, l.ShardSize-in)
		out = append(out, Extent{Shard: int(shard), Off: in, Len: take, DatOff: off})
		off += take
		n -= take
	}
	return out, nil
}

// alignBlocks widens [off, off+n) to whole checksum blocks within a shard.
func alignBlocks(off, n int64) (start, end int64) {
	start = off / BlockSize * BlockSize
	end = (off + n + BlockSize - 1) / BlockSize * BlockSize
	return start, end
}
