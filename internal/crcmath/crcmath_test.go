package crcmath

import (
	"hash"
	"hash/crc32"
	"hash/crc64"
	"math/bits"
	"math/rand/v2"
	"testing"
)

func hashes() map[*Poly]func() hash.Hash {
	nvme := crc64.MakeTable(bits.Reverse64(0xAD93D23594C93659))
	return map[*Poly]func() hash.Hash{
		CRC32:     func() hash.Hash { return crc32.NewIEEE() },
		CRC32C:    func() hash.Hash { return crc32.New(crc32.MakeTable(crc32.Castagnoli)) },
		CRC64NVME: func() hash.Hash { return crc64.New(nvme) },
	}
}

func sum(h hash.Hash, b []byte) uint64 {
	h.Write(b)
	if h.Size() == 4 {
		return uint64(h.(hash.Hash32).Sum32())
	}
	return h.(hash.Hash64).Sum64()
}

// The combined CRC equals the CRC of the whole, for each CRC and any split,
// empty halves too.
func TestCombineMatchesOnePass(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	lengths := []int{0, 1, 3, 4, 8, 31, 255, 4096, 65537, 1 << 20}
	for p, mk := range hashes() {
		for _, la := range lengths {
			for _, lb := range lengths {
				b := make([]byte, la+lb)
				for i := range b {
					b[i] = byte(r.Uint32())
				}
				want := sum(mk(), b)
				if got := p.Combine(sum(mk(), b[:la]), sum(mk(), b[la:]), int64(lb)); got != want {
					t.Fatalf("width %d, len(A)=%d len(B)=%d: combined %x, one pass %x", p.Width(), la, lb, got, want)
				}
			}
		}
	}
}

// Long lengths (5 GiB and more) exercise the high powers: x^(8(a+b)) =
// x^(8a)·x^(8b).
func TestLongLengths(t *testing.T) {
	for p := range hashes() {
		for _, ab := range [][2]uint64{{5 << 30, 123457}, {1 << 40, 1<<33 + 7}} {
			if p.xpow8n(ab[0]+ab[1]) != p.mulmod(p.xpow8n(ab[0]), p.xpow8n(ab[1])) {
				t.Fatalf("width %d: x^(8n) is not multiplicative at %v", p.Width(), ab)
			}
		}
	}
}

func BenchmarkCombineCRC32C1MiB(b *testing.B) {
	for i := range b.N {
		CRC32C.Combine(uint64(i), 0x12345678, 1<<20+int64(i&1023))
	}
}
