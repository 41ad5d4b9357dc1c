// Package crcmath combines CRCs: the CRC of A‖B from the CRCs of A and B and
// the length of B, without reading the data again.
//
// For reflected CRCs with an all-ones initial value and final XOR (CRC-32,
// CRC-32C, CRC-64/NVME) the CRC of A‖B is CRC(A)·x^(8·len(B)) modulo the
// polynomial, XOR CRC(B): appending n zero bytes multiplies the register by
// x^(8n), and the initial value and final XOR cancel out between the two
// CRCs. Polynomials are in reflected order: the register's highest bit is
// the coefficient of x^0.
//
// Two users: a volume hashes a needle's data once and derives the record's
// CRC (needle.CombineCRC), and S3's FULL_OBJECT multipart checksums are
// computed from the parts' (objectapi).
package crcmath

import "math/bits"

// Poly is one reflected CRC: its width and polynomial, with the powers
// x^(2^k) it needs precomputed.
type Poly struct {
	width  int
	poly   uint64
	pow2k  [64]uint64 // x^(2^k) modulo the polynomial
	x0, x1 uint64
}

// The CRCs that S3 and Kelp use.
var (
	CRC32     = newPoly(32, 0xEDB88320)
	CRC32C    = newPoly(32, 0x82F63B78)
	CRC64NVME = newPoly(64, bits.Reverse64(0xAD93D23594C93659))
)

func newPoly(width int, reflected uint64) *Poly {
	p := &Poly{width: width, poly: reflected}
	p.x0 = 1 << (width - 1)
	p.x1 = p.x0 >> 1
	p.pow2k[0] = p.x1
	for k := 1; k < len(p.pow2k); k++ {
		p.pow2k[k] = p.mulmod(p.pow2k[k-1], p.pow2k[k-1])
	}
	return p
}

// Width is the CRC's width in bits.
func (p *Poly) Width() int { return p.width }

// mulmod returns a·b modulo the polynomial.
func (p *Poly) mulmod(a, b uint64) uint64 {
	var prod uint64
	for m := p.x0; m != 0 && a != 0; m >>= 1 {
		if a&m != 0 {
			prod ^= b
			a ^= m
		}
		// b *= x: a shift towards the high powers, reducing x^width.
		if b&1 != 0 {
			b = b>>1 ^ p.poly
		} else {
			b >>= 1
		}
	}
	return prod
}

// xpow8n returns x^(8n) modulo the polynomial.
func (p *Poly) xpow8n(n uint64) uint64 {
	result := p.x0
	for k := 3; n != 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			result = p.mulmod(p.pow2k[k%len(p.pow2k)], result)
		}
	}
	return result
}

// Combine returns the CRC of A‖B given crcA = CRC(A), crcB = CRC(B) and
// lenB = len(B).
func (p *Poly) Combine(crcA, crcB uint64, lenB int64) uint64 {
	if lenB <= 0 {
		return crcA
	}
	return p.mulmod(p.xpow8n(uint64(lenB)), crcA) ^ crcB
}
