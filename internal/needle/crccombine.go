package needle

import "encoding/binary"

// CRC32C combination: the CRC of A‖B from the CRCs of A and B and the length
// of B. A needle carries two checksums over its data (the data's own and the
// whole record's); with this the data is hashed once and the record's CRC is
// derived, instead of a second pass over every byte read or written.
//
// The arithmetic is over GF(2) polynomials in the reflected bit order that
// CRC32C uses: bit 31 is the coefficient of x^0, bit 0 that of x^31.
// Appending n zero bytes to a message multiplies its CRC register by
// x^(8n) mod P; the pre- and post-inversion of the register cancel out
// between the two CRCs, so crc(A‖B) = crc(A)·x^(8·len(B)) mod P ⊕ crc(B).

// castagnoliReversed is the CRC32C polynomial, reflected.
const castagnoliReversed = 0x82f63b78

// xPow2n[k] is x^(2^k) mod P.
var xPow2n = func() (t [32]uint32) {
	t[0] = 1 << 30 // x^1
	for k := 1; k < len(t); k++ {
		t[k] = mulModP(t[k-1], t[k-1])
	}
	return t
}()

// mulModP returns a·b mod P.
func mulModP(a, b uint32) uint32 {
	var prod uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			prod ^= b
		}
		// b·x: a shift towards the high powers, reduced by P.
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReversed
		} else {
			b >>= 1
		}
	}
	return prod
}

// xPow8n returns x^(8n) mod P.
func xPow8n(n uint64) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n != 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = mulModP(xPow2n[k%32], p)
		}
	}
	return p
}

// CombineCRC returns the CRC32C of A‖B given crcA = CRC(A), crcB = CRC(B)
// and lenB = len(B).
func CombineCRC(crcA, crcB uint32, lenB int64) uint32 {
	if lenB <= 0 {
		return crcA
	}
	return mulModP(xPow8n(uint64(lenB)), crcA) ^ crcB
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
