package aesgcm

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"math/rand/v2"
	"testing"
)

func stdAEAD(t testing.TB, key []byte) cipher.AEAD {
	t.Helper()
	a, err := newStd(key)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func newPair(t testing.TB, key []byte) (mine, std cipher.AEAD) {
	t.Helper()
	m, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	return m, stdAEAD(t, key)
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	var seed [32]byte
	for i := 0; i < 32; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			seed[i+j] = byte(v >> (8 * j))
		}
	}
	rand.NewChaCha8(seed).Read(b)
	return b
}

// check seals and opens msg with both implementations in the ways the
// cipher.AEAD contract allows and compares every result.
func check(t *testing.T, r *rand.Rand, mine, std cipher.AEAD, nonce, msg, ad []byte) {
	t.Helper()
	want := std.Seal(nil, nonce, msg, ad)

	got := mine.Seal(nil, nonce, msg, ad)
	if !bytes.Equal(got, want) {
		t.Fatalf("Seal(len %d, ad %d) differs from the standard library", len(msg), len(ad))
	}

	// Append to a prefix.
	prefix := randBytes(r, 1+r.IntN(40))
	got = mine.Seal(append([]byte(nil), prefix...), nonce, msg, ad)
	if !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], want) {
		t.Fatalf("Seal with prefix (len %d, ad %d) wrong", len(msg), len(ad))
	}

	// In place.
	buf := make([]byte, len(msg), len(msg)+TagSize)
	copy(buf, msg)
	got = mine.Seal(buf[:0], nonce, buf, ad)
	if !bytes.Equal(got, want) || (len(msg) > 0 && &got[0] != &buf[0]) {
		t.Fatalf("in-place Seal (len %d, ad %d) wrong", len(msg), len(ad))
	}

	// Open: separate, prefixed and in place.
	pt, err := mine.Open(nil, nonce, want, ad)
	if err != nil || !bytes.Equal(pt, msg) {
		t.Fatalf("Open(len %d, ad %d): %v", len(msg), len(ad), err)
	}
	pt, err = mine.Open(append([]byte(nil), prefix...), nonce, want, ad)
	if err != nil || !bytes.Equal(pt[:len(prefix)], prefix) || !bytes.Equal(pt[len(prefix):], msg) {
		t.Fatalf("Open with prefix (len %d, ad %d): %v", len(msg), len(ad), err)
	}
	ct := append([]byte(nil), want...)
	pt, err = mine.Open(ct[:0], nonce, ct, ad)
	if err != nil || !bytes.Equal(pt, msg) {
		t.Fatalf("in-place Open (len %d, ad %d): %v", len(msg), len(ad), err)
	}
}

func testKeys(r *rand.Rand) [][]byte {
	return [][]byte{randBytes(r, 32), randBytes(r, 16), randBytes(r, 24)}
}

func TestAllShortLengths(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, key := range testKeys(r) {
		mine, std := newPair(t, key)
		for n := 0; n <= 1100; n++ {
			nonce := randBytes(r, NonceSize)
			msg := randBytes(r, n)
			ad := randBytes(r, n%81)
			check(t, r, mine, std, nonce, msg, ad)
		}
	}
}

func TestAADLengths(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, key := range testKeys(r) {
		mine, std := newPair(t, key)
		for adLen := 0; adLen <= 80; adLen++ {
			for _, n := range []int{0, 1, 15, 16, 17, 255, 256, 257, 4096} {
				check(t, r, mine, std, randBytes(r, NonceSize), randBytes(r, n), randBytes(r, adLen))
			}
		}
	}
}

func TestRandomLong(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	iters := 60
	if testing.Short() || !Accelerated(32) {
		// Without the assembly both sides are the standard library
		// (which -tags purego also makes slow).
		iters = 8
	}
	for i := 0; i < iters; i++ {
		key := randBytes(r, []int{16, 32}[i%2])
		mine, std := newPair(t, key)
		n := r.IntN(256<<10 + 1)
		if i < 4 {
			n = []int{64 << 10, 256 << 10, 1 << 20, 64<<10 + 5}[i]
		}
		check(t, r, mine, std, randBytes(r, NonceSize), randBytes(r, n), randBytes(r, r.IntN(100)))
	}
}

func TestTamper(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, key := range testKeys(r) {
		mine, _ := newPair(t, key)
		for _, n := range []int{0, 1, 16, 100, 300, 4096, 70000} {
			nonce := randBytes(r, NonceSize)
			msg := randBytes(r, n)
			ad := randBytes(r, 1+r.IntN(40))
			sealed := mine.Seal(nil, nonce, msg, ad)

			fail := func(what string, nonce, ct, ad []byte) {
				t.Helper()
				dst := make([]byte, 0, len(ct))
				pt, err := mine.Open(dst, nonce, ct, ad)
				if err == nil || pt != nil {
					t.Fatalf("%s (len %d): Open succeeded", what, n)
				}
				// Unauthenticated plaintext must not be visible in dst.
				if n > 0 && bytes.Contains(dst[:cap(dst)], msg) {
					t.Fatalf("%s (len %d): plaintext released", what, n)
				}
			}
			for _, i := range []int{0, len(sealed) / 2, len(sealed) - TagSize, len(sealed) - 1} {
				if i < 0 || i >= len(sealed) {
					continue
				}
				bad := append([]byte(nil), sealed...)
				bad[i] ^= 1 << (i % 8)
				fail("flipped byte", nonce, bad, ad)
			}
			badAD := append([]byte(nil), ad...)
			badAD[0] ^= 0x80
			fail("changed ad", nonce, sealed, badAD)
			fail("extended ad", nonce, sealed, append(append([]byte(nil), ad...), 0))
			fail("no ad", nonce, sealed, nil)
			badNonce := append([]byte(nil), nonce...)
			badNonce[11] ^= 1
			fail("changed nonce", badNonce, sealed, ad)
			fail("truncated", nonce, sealed[:len(sealed)-1], ad)
			if len(sealed) > TagSize {
				fail("dropped first byte", nonce, sealed[1:], ad)
			}
			fail("short", nonce, sealed[:TagSize-1], ad)
		}
	}
}

func TestOpenFailureInPlace(t *testing.T) {
	key := make([]byte, 32)
	mine, _ := newPair(t, key)
	nonce := make([]byte, NonceSize)
	msg := bytes.Repeat([]byte("secret!"), 100)
	sealed := mine.Seal(nil, nonce, msg, nil)
	sealed[len(sealed)-1] ^= 1
	pt, err := mine.Open(sealed[:0], nonce, sealed, nil)
	if err == nil || pt != nil {
		t.Fatal("tampered in-place Open succeeded")
	}
	if bytes.Contains(sealed, []byte("secret!")) {
		t.Fatal("in-place Open released plaintext")
	}
}

func TestPanics(t *testing.T) {
	for _, keyLen := range []int{16, 24, 32} {
		mine, _ := newPair(t, make([]byte, keyLen))
		if mine.NonceSize() != 12 || mine.Overhead() != 16 {
			t.Fatalf("NonceSize %d Overhead %d", mine.NonceSize(), mine.Overhead())
		}
		mustPanic := func(what string, f func()) {
			t.Helper()
			defer func() {
				if recover() == nil {
					t.Fatalf("key %d: %s did not panic", keyLen, what)
				}
			}()
			f()
		}
		mustPanic("Seal short nonce", func() { mine.Seal(nil, make([]byte, 11), nil, nil) })
		mustPanic("Seal long nonce", func() { mine.Seal(nil, make([]byte, 13), nil, nil) })
		mustPanic("Open short nonce", func() { mine.Open(nil, make([]byte, 8), make([]byte, 16), nil) })
		buf := make([]byte, 100)
		mustPanic("Seal inexact overlap", func() { mine.Seal(buf[1:1], make([]byte, 12), buf[:50], nil) })
		mustPanic("Seal overlapping ad", func() { mine.Seal(buf[:0], make([]byte, 12), nil, buf[:10]) })
		sealed := mine.Seal(nil, make([]byte, 12), make([]byte, 40), nil)
		mustPanic("Open inexact overlap", func() { mine.Open(sealed[1:1], make([]byte, 12), sealed, nil) })
	}
}

func TestBadKey(t *testing.T) {
	for _, n := range []int{0, 1, 15, 17, 31, 33, 64} {
		if _, err := New(make([]byte, n)); err == nil {
			t.Fatalf("New with a %d-byte key succeeded", n)
		}
	}
}

// TestKnownAnswer checks a vector from the GCM specification (test case
// 15 of McGrew and Viega's "The Galois/Counter Mode of Operation", AES-256,
// 60-byte plaintext, 20-byte additional data is case 16).
func TestKnownAnswer(t *testing.T) {
	key := hexBytes("feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308")
	nonce := hexBytes("cafebabefacedbaddecaf888")
	pt := hexBytes("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39")
	ad := hexBytes("feedfacedeadbeeffeedfacedeadbeefabaddad2")
	want := hexBytes("522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662" +
		"76fc6ece0f4e1768cddf8853bb2d551b")
	a, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Seal(nil, nonce, pt, ad); !bytes.Equal(got, want) {
		t.Fatalf("Seal = %x, want %x", got, want)
	}
}

func hexBytes(s string) []byte {
	b := make([]byte, len(s)/2)
	for i := range b {
		b[i] = unhex(s[2*i])<<4 | unhex(s[2*i+1])
	}
	return b
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	panic("bad hex")
}

func FuzzSealOpen(f *testing.F) {
	f.Add([]byte("0123456789abcdef0123456789abcdef"), []byte("nonce-nonce!"), []byte("hello"), []byte("ad"))
	f.Add(make([]byte, 16), make([]byte, 12), make([]byte, 300), []byte{})
	f.Fuzz(func(t *testing.T, key, nonce, msg, ad []byte) {
		if len(key) >= 32 {
			key = key[:32]
		} else if len(key) >= 16 {
			key = key[:16]
		} else {
			return
		}
		if len(nonce) < NonceSize {
			return
		}
		nonce = nonce[:NonceSize]
		mine, std := newPair(t, key)
		want := std.Seal(nil, nonce, msg, ad)
		got := mine.Seal(nil, nonce, msg, ad)
		if !bytes.Equal(got, want) {
			t.Fatalf("Seal differs: got %x want %x", got, want)
		}
		pt, err := mine.Open(nil, nonce, want, ad)
		if err != nil || !bytes.Equal(pt, msg) {
			t.Fatalf("Open: %v", err)
		}
		// msg read as a sealed message: both must agree on acceptance.
		p1, e1 := mine.Open(nil, nonce, msg, ad)
		p2, e2 := std.Open(nil, nonce, msg, ad)
		if (e1 == nil) != (e2 == nil) || !bytes.Equal(p1, p2) {
			t.Fatalf("Open of arbitrary input differs: %v vs %v", e1, e2)
		}
	})
}

var _ = aes.BlockSize
