package aesgcm

import (
	"crypto/cipher"
	"testing"
)

func benchAEADs(b *testing.B) map[string]cipher.AEAD {
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	mine, err := New(key)
	if err != nil {
		b.Fatal(err)
	}
	std, err := newStd(key)
	if err != nil {
		b.Fatal(err)
	}
	return map[string]cipher.AEAD{"impl=kelp": mine, "impl=std": std}
}

func benchSeal(b *testing.B, size int) {
	for _, name := range []string{"impl=std", "impl=kelp"} {
		a := benchAEADs(b)[name]
		b.Run(name, func(b *testing.B) {
			nonce := make([]byte, NonceSize)
			msg := make([]byte, size)
			ad := make([]byte, 13)
			out := make([]byte, 0, size+TagSize)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				out = a.Seal(out[:0], nonce, msg, ad)
			}
		})
	}
}

func benchOpen(b *testing.B, size int) {
	for _, name := range []string{"impl=std", "impl=kelp"} {
		a := benchAEADs(b)[name]
		b.Run(name, func(b *testing.B) {
			nonce := make([]byte, NonceSize)
			ad := make([]byte, 13)
			sealed := a.Seal(nil, nonce, make([]byte, size), ad)
			out := make([]byte, 0, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				out, err = a.Open(out[:0], nonce, sealed, ad)
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSeal64K(b *testing.B) { benchSeal(b, 64<<10) }
func BenchmarkOpen64K(b *testing.B) { benchOpen(b, 64<<10) }
func BenchmarkSeal1K(b *testing.B)  { benchSeal(b, 1<<10) }
func BenchmarkOpen1K(b *testing.B)  { benchOpen(b, 1<<10) }

// BenchmarkNew measures key setup (New is called per object or chunk).
func BenchmarkNew(b *testing.B) {
	key := make([]byte, 32)
	b.Run("impl=std", func(b *testing.B) {
		for b.Loop() {
			if _, err := newStd(key); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=kelp", func(b *testing.B) {
		for b.Loop() {
			if _, err := New(key); err != nil {
				b.Fatal(err)
			}
		}
	})
}
