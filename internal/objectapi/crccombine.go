package objectapi

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// A FULL_OBJECT multipart checksum is the CRC of the whole object, which
// Kelp never reads in one piece: it is computed from the parts' CRCs. For the
// reflected CRCs S3 uses (CRC32, CRC32C, CRC64NVME, all with an all-ones
// initial value and final XOR) the CRC of A‖B is CRC(A) multiplied by
// x^(8·len(B)) modulo the polynomial, XOR CRC(B): the initial value and final
// XOR cancel out. Polynomials are in reflected order, where the highest bit
// of the register is the coefficient of x^0.

// crcParams describes one reflected CRC: its register width and polynomial.
type crcParams struct {
	width int    // 32 or 64
	poly  uint64 // reflected
}

var combinable = map[string]crcParams{
	ChecksumCRC32:     {32, 0xEDB88320},
	ChecksumCRC32C:    {32, 0x82F63B78},
	ChecksumCRC64NVME: {64, bits.Reverse64(0xAD93D23594C93659)},
}

// one is the polynomial 1 (x^0): the register's highest bit.
func (p crcParams) one() uint64 { return 1 << (p.width - 1) }

// mulmod returns a·b modulo the polynomial.
func (p crcParams) mulmod(a, b uint64) uint64 {
	var prod uint64
	for m := p.one(); m != 0 && a != 0; m >>= 1 {
		if a&m != 0 {
			prod ^= b
			a ^= m
		}
		// b *= x: a shift towards higher powers, reducing the x^width term.
		if b&1 != 0 {
			b = b>>1 ^ p.poly
		} else {
			b >>= 1
		}
	}
	return prod
}

// xpow8n returns x^(8n) modulo the polynomial.
func (p crcParams) xpow8n(n uint64) uint64 {
	result, pow := p.one(), p.one()>>1 // x^0, x^1
	for e := n * 8; e != 0; e >>= 1 {
		if e&1 != 0 {
			result = p.mulmod(pow, result)
		}
		pow = p.mulmod(pow, pow)
	}
	return result
}

// combine returns the CRC of A‖B from crcA, crcB and B's length.
func (p crcParams) combine(crcA, crcB, lenB uint64) uint64 {
	return p.mulmod(p.xpow8n(lenB), crcA) ^ crcB
}

// combineCRCs returns the big-endian CRC of the concatenation of parts whose
// big-endian CRCs are sums[i] and lengths sizes[i].
func combineCRCs(alg string, sums [][]byte, sizes []int64) ([]byte, error) {
	p, ok := combinable[alg]
	if !ok {
		return nil, fmt.Errorf("%s is not a CRC", alg)
	}
	n := p.width / 8
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
			crc = p.combine(crc, v, uint64(sizes[i]))
		}
	}
	out := make([]byte, 8)
	binary.BigEndian.PutUint64(out, crc)
	return out[8-n:], nil
}
