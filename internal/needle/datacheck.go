package needle

import (
	"encoding/binary"

	"github.com/kelpfs/kelp/internal/crcmath"
)

// CombineCRC returns the CRC32C of A‖B given crcA = CRC(A), crcB = CRC(B)
// and lenB = len(B) (crcmath). A needle carries two checksums over its data
// (the data's own and the whole record's); with this the data is hashed once
// and the record's CRC is derived, instead of a second pass over every byte
// read or written.
func CombineCRC(crcA, crcB uint32, lenB int64) uint32 {
	return uint32(crcmath.CRC32C.Combine(uint64(crcA), uint64(crcB), lenB))
}

// combineMin is the data length from which combining two CRCs (about a
// microsecond) beats hashing the data a second time (about 80 ns per KiB).
const combineMin = 16 << 10

// ExtendCRC returns the CRC32C of A‖data given crcA = CRC(A) and
// dataCRC = CRC(data), the cheaper way for data's length.
func ExtendCRC(crcA, dataCRC uint32, data []byte) uint32 {
	if len(data) < combineMin {
		return UpdateCRC(crcA, data)
	}
	return CombineCRC(crcA, dataCRC, int64(len(data)))
}

// DataCheck verifies a large needle's two checksums while its data is read
// in order, hashing the data once.
type DataCheck struct {
	headCRC, dataCRC  uint32
	wantData, wantRec uint32
	n                 int64
}

// NewDataCheck starts the check of a record whose bytes before the data
// are head and whose trailer holds wantData and wantRec.
func NewDataCheck(head []byte, wantData, wantRec uint32) DataCheck {
	return DataCheck{headCRC: CRC(head), wantData: wantData, wantRec: wantRec}
}

// Add takes the next piece of data.
func (c *DataCheck) Add(p []byte) {
	c.dataCRC = UpdateCRC(c.dataCRC, p)
	c.n += int64(len(p))
}

// Verify reports whether the data added so far, as the whole data, matches
// both checksums.
func (c *DataCheck) Verify() bool {
	var tr [4]byte
	binary.BigEndian.PutUint32(tr[:], c.wantData)
	rec := UpdateCRC(CombineCRC(c.headCRC, c.dataCRC, c.n), tr[:])
	return c.dataCRC == c.wantData && rec == c.wantRec
}
