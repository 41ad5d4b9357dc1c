//go:build amd64 && !purego

package aesgcm

import (
	"bytes"
	"crypto/aes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

func TestAcceleratedUsed(t *testing.T) {
	if !useAsm {
		t.Skip("CPU lacks VAES/VPCLMULQDQ: the standard library is used")
	}
	for _, n := range []int{16, 32} {
		a, err := New(make([]byte, n))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := a.(*gcmAsm); !ok || !Accelerated(n) {
			t.Fatalf("%d-byte key: got %T", n, a)
		}
	}
	if Accelerated(24) {
		t.Fatal("24-byte keys are not accelerated")
	}
}

// refCTR is counter mode as SP 800-38D defines it (inc32 on the last four
// bytes, modulo 2^32), one block at a time with crypto/aes.
func refCTR(t *testing.T, key []byte, ctr [16]byte, src []byte) []byte {
	b, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, len(src))
	var ks [16]byte
	for i := 0; i < len(src); i += 16 {
		b.Encrypt(ks[:], ctr[:])
		for j := i; j < i+16 && j < len(src); j++ {
			out[j] = src[j] ^ ks[j-i]
		}
		binary.BigEndian.PutUint32(ctr[12:], binary.BigEndian.Uint32(ctr[12:])+1)
	}
	return out
}

// TestCounterWrap drives the keystream generator directly across the
// 32-bit counter wrap, which whole messages cannot reach (a 12-byte nonce
// starts the counter at 2 and allows at most 2^32-2 blocks).
func TestCounterWrap(t *testing.T) {
	if !useAsm {
		t.Skip("no assembly on this CPU")
	}
	r := rand.New(rand.NewPCG(9, 10))
	for _, keyLen := range []int{16, 32} {
		key := randBytes(r, keyLen)
		g := newFast(key).(*gcmAsm)
		for _, start := range []uint32{0xffffffff, 0xfffffffe, 0xfffffff0, 0xffffffe5, 0, 1, 0x7fffffff} {
			for _, nblocks := range []int{1, 2, 3, 15, 16, 17, 31, 32, 33, 40} {
				var ctr [16]byte
				copy(ctr[:12], randBytes(r, 12))
				binary.BigEndian.PutUint32(ctr[12:], start)
				src := randBytes(r, nblocks*16+r.IntN(16))
				want := refCTR(t, key, ctr, src)
				got := make([]byte, len(src))
				saved := ctr
				g.ctr(got, src, &ctr)
				if ctr != saved {
					t.Fatal("ctr modified its counter argument")
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("key %d start %#x blocks %d: keystream differs", keyLen, start, nblocks)
				}
			}
		}
	}
}

// TestCTRBufferBounds checks that the assembly writes exactly the blocks
// it is asked for and nothing around them.
func TestCTRBufferBounds(t *testing.T) {
	if !useAsm {
		t.Skip("no assembly on this CPU")
	}
	g := newFast(make([]byte, 32)).(*gcmAsm)
	for n := 0; n <= 40; n++ {
		buf := bytes.Repeat([]byte{0xa5}, 64+n*16+64)
		var ctr [16]byte
		if n > 0 {
			ctrXOR(&g.rk[0], g.rounds, &ctr, &buf[64], &buf[64], n)
		}
		for i, c := range buf {
			if (i < 64 || i >= 64+n*16) && c != 0xa5 {
				t.Fatalf("n=%d: byte %d outside the output changed", n, i)
			}
		}
	}
}

func BenchmarkPass(b *testing.B) {
	g := newFast(make([]byte, 32)).(*gcmAsm)
	buf := make([]byte, 64<<10)
	b.Run("ctr", func(b *testing.B) {
		var ctr [16]byte
		b.SetBytes(int64(len(buf)))
		for b.Loop() {
			ctrXOR(&g.rk[0], g.rounds, &ctr, &buf[0], &buf[0], len(buf)/16)
		}
	})
	b.Run("stitch", func(b *testing.B) {
		var s, ctr [16]byte
		b.SetBytes(int64(len(buf)))
		for b.Loop() {
			gcmStitch(&g.rk[0], g.rounds, &ctr, &g.htab[0], &s, &buf[0], &buf[0], &buf[0], len(buf)/batch)
		}
	})
	b.Run("ghash", func(b *testing.B) {
		var s [16]byte
		b.SetBytes(int64(len(buf)))
		for b.Loop() {
			ghashBlocks(&g.htab[0], &s, &buf[0], len(buf)/16)
		}
	})
}

// TestStitchDirect checks the stitched CTR+GHASH loop on its own, with
// counters that cross the low-byte carry and the 32-bit wrap, against the
// separate CTR and GHASH routines (themselves checked against crypto/aes
// and the standard library), for hsrc = src (Open) and a separate buffer.
func TestStitchDirect(t *testing.T) {
	if !useAsm {
		t.Skip("no assembly on this CPU")
	}
	r := rand.New(rand.NewPCG(11, 12))
	for _, keyLen := range []int{16, 32} {
		key := randBytes(r, keyLen)
		g := newFast(key).(*gcmAsm)
		for _, start := range []uint32{2, 0xe0, 0xf0, 0xf1, 0xff, 0xffffff00, 0xffffffe0, 0xfffffff1, 0xffffffff} {
			for _, nb := range []int{1, 2, 3, 17} {
				var ctr [16]byte
				copy(ctr[:12], randBytes(r, 12))
				binary.BigEndian.PutUint32(ctr[12:], start)
				src := randBytes(r, nb*batch)
				hsrc := randBytes(r, nb*batch)
				state0 := [16]byte(randBytes(r, 16))

				want := refCTR(t, key, ctr, src)
				wantS := state0
				ghashBlocks(&g.htab[0], &wantS, &hsrc[0], nb*16)
				got := make([]byte, len(src))
				s := state0
				gcmStitch(&g.rk[0], g.rounds, &ctr, &g.htab[0], &s, &got[0], &src[0], &hsrc[0], nb)
				if !bytes.Equal(got, want) || s != wantS {
					t.Fatalf("key %d start %#x batches %d: stitched result differs", keyLen, start, nb)
				}

				// In place, hashing the input (as Open does).
				wantS = state0
				ghashBlocks(&g.htab[0], &wantS, &src[0], nb*16)
				buf := append([]byte(nil), src...)
				s = state0
				gcmStitch(&g.rk[0], g.rounds, &ctr, &g.htab[0], &s, &buf[0], &buf[0], &buf[0], nb)
				if !bytes.Equal(buf, want) || s != wantS {
					t.Fatalf("key %d start %#x batches %d: in-place stitched result differs", keyLen, start, nb)
				}
			}
		}
	}
}
