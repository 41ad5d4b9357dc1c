package needle

import (
	"encoding/binary"
	"fmt"

	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/ttl"
)

// Superblock layout.
const (
	SuperblockSize = 32
	// Version is the current format version of superblocks and needles.
	Version = 1
)

var magic = [4]byte{'K', 'E', 'L', 'P'}

// Superblock describes a volume; it is the first SuperblockSize bytes of a .dat.
type Superblock struct {
	Version            uint8
	Replication        replication.Code
	TTL                ttl.TTL
	CompactionRevision uint32
	CreatedAtNs        int64
}

// Marshal encodes the superblock.
func (s Superblock) Marshal() []byte {
	b := make([]byte, 0, SuperblockSize)
	b = append(b, magic[:]...)
	c, u := s.TTL.Bytes()
	b = append(b, s.Version, s.Replication.Byte(), c, u)
	b = binary.BigEndian.AppendUint32(b, s.CompactionRevision)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(s.CreatedAtNs))
	b = binary.BigEndian.AppendUint32(b, 0)
	return binary.BigEndian.AppendUint32(b, CRC(b))
}

// ParseSuperblock decodes and verifies a superblock.
func ParseSuperblock(b []byte) (Superblock, error) {
	if len(b) < SuperblockSize {
		return Superblock{}, fmt.Errorf("%w: superblock of %d bytes", ErrCorrupt, len(b))
	}
	if [4]byte(b[:4]) != magic {
		return Superblock{}, fmt.Errorf("%w: bad superblock magic %q", ErrCorrupt, b[:4])
	}
	if got, want := CRC(b[:28]), binary.BigEndian.Uint32(b[28:]); got != want {
		return Superblock{}, fmt.Errorf("%w: superblock checksum %08x, stored %08x", ErrCorrupt, got, want)
	}
	s := Superblock{
		Version:            b[4],
		Replication:        replication.FromByte(b[5]),
		TTL:                ttl.FromBytes(b[6], b[7]),
		CompactionRevision: binary.BigEndian.Uint32(b[8:]),
		CreatedAtNs:        int64(binary.BigEndian.Uint64(b[16:])),
	}
	if s.Version != Version {
		return s, fmt.Errorf("%w: unsupported format version %d", ErrCorrupt, s.Version)
	}
	return s, nil
}
