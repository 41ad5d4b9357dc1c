//go:build amd64 && !purego

package aesgcm

import (
	"crypto/cipher"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"unsafe"

	"github.com/klauspost/cpuid/v2"
	"golang.org/x/sys/cpu"
)

// useAsm: the assembly needs AVX2 (YMM state saved by the OS), AES-NI and
// PCLMULQDQ, and their 256-bit forms VAES and VPCLMULQDQ.
var useAsm = cpu.X86.HasAVX2 && cpu.X86.HasAES && cpu.X86.HasPCLMULQDQ &&
	cpuid.CPU.Supports(cpuid.AVX2, cpuid.AESNI, cpuid.CLMUL, cpuid.VAES, cpuid.VPCLMULQDQ)

//go:noescape
func expandKey128(key *byte, rk *byte)

//go:noescape
func expandKey256(key *byte, rk *byte)

//go:noescape
func ctrXOR(rk *byte, rounds int, ctr *[16]byte, dst, src *byte, nblocks int)

//go:noescape
func ghashBlocks(htab *byte, state *[16]byte, src *byte, nblocks int)

//go:noescape
func ghashInit(htab *byte, h1 *[16]byte)

//go:noescape
func gcmStitch(rk *byte, rounds int, ctr *[16]byte, htab *byte, state *[16]byte, dst, src, hsrc *byte, nbatches int)

const (
	blockSize = 16
	// batch is the bytes gcmStitch handles per iteration (16 blocks).
	batch = 16 * blockSize
	// maxPlain is the longest plaintext GCM allows: 2^32-2 blocks.
	maxPlain = (1<<32 - 2) * blockSize
)

var errOpen = errors.New("cipher: message authentication failed")

// gcmAsm is the accelerated AEAD.
type gcmAsm struct {
	// rk holds the round keys, each stored twice (32 bytes per round).
	rk [15 * 32]byte
	// htab holds R(H^k x^-1) for k = 16 down to 1, then the XOR of the
	// halves of each for Karatsuba multiplication (see gcm_amd64.s).
	htab   [32 * blockSize]byte
	rounds int
}

func fastKeyLen(n int) bool { return useAsm && (n == 16 || n == 32) }

func newFast(key []byte) cipher.AEAD {
	if !fastKeyLen(len(key)) {
		return nil
	}
	g := new(gcmAsm)
	if len(key) == 32 {
		expandKey256(&key[0], &g.rk[0])
		g.rounds = 14
	} else {
		expandKey128(&key[0], &g.rk[0])
		g.rounds = 10
	}
	// H = E_K(0^128): the first keystream block of the all-zero counter.
	var h, zero [blockSize]byte
	ctrXOR(&g.rk[0], g.rounds, &zero, &h[0], &zero[0], 1)
	var h1 [blockSize]byte
	mulXInv(&h1, &h)
	ghashInit(&g.htab[0], &h1)
	clear(h[:])
	clear(h1[:])
	return g
}

// mulXInv sets out to R(h x^-1) as a little-endian 128-bit integer, where
// R(a) is the byte-reversed (bit-reflected) form of GCM block a. In that
// form multiplying by x^-1 is a left shift by one, and the bit shifted out
// (the coefficient of x^0) comes back as x^-1 = x^127 + x^6 + x + 1, that
// is 0xC2000000000000000000000000000001. Constant time: the conditional
// reduction is applied with a mask.
func mulXInv(out, h *[blockSize]byte) {
	hi := binary.BigEndian.Uint64(h[:8])
	lo := binary.BigEndian.Uint64(h[8:])
	mask := -(hi >> 63)
	hi = hi<<1 | lo>>63
	lo <<= 1
	hi ^= mask & 0xc200000000000000
	lo ^= mask & 1
	binary.LittleEndian.PutUint64(out[:8], lo)
	binary.LittleEndian.PutUint64(out[8:], hi)
}

func (g *gcmAsm) NonceSize() int { return NonceSize }
func (g *gcmAsm) Overhead() int  { return TagSize }

// ctr sets dst to src XOR the keystream starting at counter block *ctr.
// len(dst) == len(src).
func (g *gcmAsm) ctr(dst, src []byte, ctr *[blockSize]byte) {
	n := len(src)
	full := n / blockSize
	if full > 0 {
		ctrXOR(&g.rk[0], g.rounds, ctr, &dst[0], &src[0], full)
	}
	if rem := n - full*blockSize; rem > 0 {
		var cb, buf [blockSize]byte
		cb = *ctr
		c := binary.BigEndian.Uint32(cb[12:]) + uint32(full) // inc32, mod 2^32
		binary.BigEndian.PutUint32(cb[12:], c)
		copy(buf[:], src[full*blockSize:])
		ctrXOR(&g.rk[0], g.rounds, &cb, &buf[0], &buf[0], 1)
		copy(dst[full*blockSize:], buf[:rem])
		clear(buf[:])
	}
}

// ghash absorbs data zero-padded to a whole number of blocks.
func (g *gcmAsm) ghash(s *[blockSize]byte, data []byte) {
	full := len(data) / blockSize
	if full > 0 {
		ghashBlocks(&g.htab[0], s, &data[0], full)
	}
	if rem := len(data) - full*blockSize; rem > 0 {
		var buf [blockSize]byte
		copy(buf[:], data[full*blockSize:])
		ghashBlocks(&g.htab[0], s, &buf[0], 1)
	}
}

// ctrAt returns counter block cb advanced by k blocks (inc32, mod 2^32).
func ctrAt(cb *[blockSize]byte, k int) [blockSize]byte {
	r := *cb
	binary.BigEndian.PutUint32(r[12:], binary.BigEndian.Uint32(r[12:])+uint32(k))
	return r
}

// finish absorbs the length block into s and writes the tag
// E_K(J0) ^ s to out.
func (g *gcmAsm) finish(out []byte, s, j0 *[blockSize]byte, adLen, ctLen int) {
	var lens, t [blockSize]byte
	binary.BigEndian.PutUint64(lens[:8], uint64(adLen)*8)
	binary.BigEndian.PutUint64(lens[8:], uint64(ctLen)*8)
	ghashBlocks(&g.htab[0], s, &lens[0], 1)
	ctrXOR(&g.rk[0], g.rounds, j0, &t[0], &s[0], 1)
	copy(out, t[:TagSize])
}

// checkOverlaps panics, as crypto/cipher does, when the output out
// overlaps the input other than exactly (in place) or the additional data.
func checkOverlaps(out, in, additionalData []byte) {
	if inexactOverlap(out, in) {
		panic("crypto/cipher: invalid buffer overlap of output and input")
	}
	if anyOverlap(out, additionalData) {
		panic("crypto/cipher: invalid buffer overlap of output and additional data")
	}
}

// begin returns the pre-counter block J0 of a 12-byte nonce, the counter
// block of the first data block, and the GHASH state after the additional
// data.
func (g *gcmAsm) begin(nonce, additionalData []byte) (j0, cb, s [blockSize]byte) {
	copy(j0[:], nonce)
	j0[15] = 1
	cb = ctrAt(&j0, 1)
	g.ghash(&s, additionalData)
	return j0, cb, s
}

func (g *gcmAsm) Seal(dst, nonce, plaintext, additionalData []byte) []byte {
	if len(nonce) != NonceSize {
		panic("crypto/cipher: incorrect nonce length given to GCM")
	}
	if uint64(len(plaintext)) > maxPlain {
		panic("crypto/cipher: message too large for GCM")
	}
	ret, out := sliceForAppend(dst, len(plaintext)+TagSize)
	checkOverlaps(out, plaintext, additionalData)
	j0, cb, s := g.begin(nonce, additionalData)

	n := len(plaintext)
	ct := out[:n]
	done, hashed := 0, 0
	if batches := n / batch; batches > 0 {
		// Batch 0 alone, then batches 1.. stitched with the hashing of
		// the batch before each; the last batch is hashed below.
		ctrXOR(&g.rk[0], g.rounds, &cb, &ct[0], &plaintext[0], batch/blockSize)
		if batches > 1 {
			c1 := ctrAt(&cb, batch/blockSize)
			gcmStitch(&g.rk[0], g.rounds, &c1, &g.htab[0], &s,
				&ct[batch], &plaintext[batch], &ct[0], batches-1)
		}
		done = batches * batch
		hashed = done - batch
	}
	if done < n {
		c := ctrAt(&cb, done/blockSize)
		g.ctr(ct[done:], plaintext[done:], &c)
	}
	g.ghash(&s, ct[hashed:])
	g.finish(out[n:], &s, &j0, len(additionalData), n)
	return ret
}

func (g *gcmAsm) Open(dst, nonce, ciphertext, additionalData []byte) ([]byte, error) {
	if len(nonce) != NonceSize {
		panic("crypto/cipher: incorrect nonce length given to GCM")
	}
	if len(ciphertext) < TagSize || uint64(len(ciphertext)) > maxPlain+TagSize {
		return nil, errOpen
	}
	n := len(ciphertext) - TagSize
	ret, out := sliceForAppend(dst, n)
	checkOverlaps(out, ciphertext, additionalData)
	j0, cb, s := g.begin(nonce, additionalData)

	ct := ciphertext[:n]
	done := 0
	if batches := n / batch; batches > 0 {
		// Each batch is hashed before its plaintext is stored, so
		// in-place decryption is safe.
		gcmStitch(&g.rk[0], g.rounds, &cb, &g.htab[0], &s, &out[0], &ct[0], &ct[0], batches)
		done = batches * batch
	}
	if done < n {
		g.ghash(&s, ct[done:]) // before decrypting: out may alias ct
		c := ctrAt(&cb, done/blockSize)
		g.ctr(out[done:], ct[done:], &c)
	}
	var want [TagSize]byte
	g.finish(want[:], &s, &j0, len(additionalData), n)
	if subtle.ConstantTimeCompare(want[:], ciphertext[n:]) != 1 {
		// Like the standard library: never release unauthenticated
		// plaintext, clear what was decrypted.
		clear(out)
		return nil, errOpen
	}
	return ret, nil
}

// sliceForAppend extends in by n bytes, reallocating if needed; head is
// the whole result, tail the n new bytes.
func sliceForAppend(in []byte, n int) (head, tail []byte) {
	if total := len(in) + n; cap(in) >= total {
		head = in[:total]
	} else {
		head = make([]byte, total)
		copy(head, in)
	}
	tail = head[len(in):]
	return
}

// anyOverlap reports whether x and y share memory at any index.
func anyOverlap(x, y []byte) bool {
	if len(x) == 0 || len(y) == 0 {
		return false
	}
	x0 := uintptr(unsafe.Pointer(&x[0]))
	y0 := uintptr(unsafe.Pointer(&y[0]))
	return x0 <= y0+uintptr(len(y)-1) && y0 <= x0+uintptr(len(x)-1)
}

// inexactOverlap reports whether x and y share memory at an index other
// than the same one (x and y starting at the same address is allowed).
func inexactOverlap(x, y []byte) bool {
	if len(x) == 0 || len(y) == 0 || &x[0] == &y[0] {
		return false
	}
	return anyOverlap(x, y)
}
