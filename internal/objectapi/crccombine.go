package objectapi

import (
	"encoding/binary"
	"fmt"

	"github.com/kelpfs/kelp/internal/crcmath"
)

// A FULL_OBJECT multipart checksum is the CRC of the whole object, which
// Kelp never reads in one piece: it is computed from the parts' CRCs
// (crcmath).
var combinable = map[string]*crcmath.Poly{
	ChecksumCRC32:     crcmath.CRC32,
	ChecksumCRC32C:    crcmath.CRC32C,
	ChecksumCRC64NVME: crcmath.CRC64NVME,
}

// combineCRCs returns the big-endian CRC of the concatenation of parts whose
// big-endian CRCs are sums[i] and lengths sizes[i].
func combineCRCs(alg string, sums [][]byte, sizes []int64) ([]byte, error) {
	p, ok := combinable[alg]
	if !ok {
		return nil, fmt.Errorf("%s is not a CRC", alg)
	}
	n := p.Width() / 8
	var crc uint64
	for i, s := range sums {
		if len(s) != n {
			return nil, fmt.Errorf("part checksum of %d bytes, want %d", len(s), n)
		}
		var v uint64
		if n == 4 {
			v = uint64(binary.BigEndian.Uint32(s))
		} else {
			v = binary.BigEndian.Uint64(s)
		}
		if i == 0 {
			crc = v
		} else {
			crc = p.Combine(crc, v, sizes[i])
		}
	}
	out := make([]byte, 8)
	binary.BigEndian.PutUint64(out, crc)
	return out[8-n:], nil
}
