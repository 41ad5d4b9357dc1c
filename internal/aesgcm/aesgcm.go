// Package aesgcm provides AES-GCM (NIST SP 800-38D) with 12-byte nonces and
// 16-byte tags that is faster than the standard library's on x86-64
// processors with VAES and VPCLMULQDQ.
//
// # What
//
// New returns a cipher.AEAD whose Seal and Open produce exactly the bytes of
// cipher.NewGCM(aes.NewCipher(key)) for every input, with the same contract:
// dst may be plaintext[:0] (or ciphertext[:0]) for in-place operation,
// results are appended to dst, other overlaps panic, a wrong nonce length
// panics, and Open reports "cipher: message authentication failed" for any
// ciphertext, tag, nonce or additional data that does not authenticate.
//
// # Why
//
// Kelp seals object data (internal/sse) and chunks at rest (internal/chunk)
// with AES-256-GCM in 64 KiB segments, so GCM throughput bounds encrypted
// GET and PUT. Go's own amd64 assembly processes one 128-bit block per AES
// or carry-less-multiply instruction; VAES and VPCLMULQDQ on 256-bit YMM
// registers process two, which roughly doubles throughput on CPUs that have
// them (AMD Zen 3 and later, Intel Ice Lake and later) even without AVX-512.
//
// # When the fast path is used
//
// On amd64 (not built with the purego tag) when the CPU and OS support AVX2,
// AES-NI, PCLMULQDQ, VAES and VPCLMULQDQ, and the key is 16 or 32 bytes
// (AES-128 or AES-256). In every other case (other architectures, older
// CPUs, 24-byte keys, -tags purego) New returns the standard library's
// AEAD, so callers can use New unconditionally.
//
// # Design and constant-time notes
//
// The fast path works on batches of sixteen blocks: counter-mode AES in
// eight YMM registers (two blocks each), and GHASH with precomputed powers
// H^1..H^16, Karatsuba multiplication and one modular reduction per batch.
// The two are stitched into one loop so the AES and carry-less-multiply
// units work at the same time (Seal hashes the batch encrypted in the
// previous iteration, Open the batch it is decrypting). Partial batches
// and blocks use simpler loops. Open decrypts and authenticates in that
// one pass and, like the standard library, clears the plaintext it wrote
// if the tag does not match, so unauthenticated plaintext is never
// returned or left in dst.
//
// All operations on key material and data are constant time: round keys
// are expanded with AESKEYGENASSIST, AES rounds use VAESENC, field
// multiplication uses carry-less multiplication, the one conditional step
// of the H precomputation uses masks, and the tag comparison uses
// crypto/subtle. No table is indexed by secret data and no branch depends
// on it; only lengths and the (public, nonce-derived) block counter steer
// control flow. H and its powers are derived with the AES and GHASH code
// itself. The AES state registers are cleared on return.
package aesgcm

import (
	"crypto/aes"
	"crypto/cipher"
)

// NonceSize and TagSize are those of the standard GCM mode.
const (
	NonceSize = 12
	TagSize   = 16
)

// New returns an AES-GCM AEAD with 12-byte nonces and 16-byte tags for key
// (16, 24 or 32 bytes). It uses the accelerated implementation when the
// CPU supports it and the key is 16 or 32 bytes, and the standard library's
// otherwise; both give identical results.
func New(key []byte) (cipher.AEAD, error) {
	if a := newFast(key); a != nil {
		return a, nil
	}
	return newStd(key)
}

func newStd(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// Accelerated reports whether New uses the accelerated implementation for
// keys of n bytes on this machine.
func Accelerated(n int) bool { return fastKeyLen(n) }
