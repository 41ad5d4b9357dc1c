package volume

import (
	"math/rand"
	"runtime"
	"testing"
)

func TestNeedleIndexAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	x := newNeedleIndex()
	ref := map[uint64]indexEntry{}
	key := uint64(1)
	for i := 0; i < 60000; i++ {
		var k uint64
		switch r := rng.Intn(10); {
		case r < 6: // mostly increasing with varying gaps, some huge
			key += uint64(1 + rng.Intn(3))
			if rng.Intn(500) == 0 {
				key += 1 << 20
			}
			k = key
		case r < 8: // overwrite an existing key
			k = key - uint64(rng.Intn(int(min(key, 5000))))
		default: // out of order, possibly new
			k = uint64(rng.Int63n(int64(key) + 1))
		}
		e := indexEntry{off: uint32(i), size: uint32(rng.Intn(1000))}
		_, existed := x.set(k, e)
		_, refExisted := ref[k]
		if existed != refExisted {
			t.Fatalf("set(%d) existed=%v, want %v", k, existed, refExisted)
		}
		ref[k] = e
	}
	if x.len() != len(ref) {
		t.Fatalf("len %d, want %d", x.len(), len(ref))
	}
	for k, want := range ref {
		if got, ok := x.get(k); !ok || got != want {
			t.Fatalf("get(%d) = %v %v, want %v", k, got, ok, want)
		}
	}
	if _, ok := x.get(key + 1); ok {
		t.Fatal("found a key never set")
	}
	var prev uint64
	n := 0
	x.ascend(func(k uint64, e indexEntry) bool {
		if n > 0 && k <= prev {
			t.Fatalf("ascend out of order: %d after %d", k, prev)
		}
		if ref[k] != e {
			t.Fatalf("ascend value for %d", k)
		}
		prev = k
		n++
		return true
	})
	if n != len(ref) {
		t.Fatalf("ascend visited %d of %d", n, len(ref))
	}
}

func indexBytesPerNeedle(b *testing.B, stride uint64) {
	const n = 1_000_000
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		x := newNeedleIndex()
		for k := uint64(0); k < n; k++ {
			x.set(1+k*stride, indexEntry{off: uint32(k), size: 1024})
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/needle")
		runtime.KeepAlive(x)
	}
}

// BenchmarkIndexBytesPerNeedle measures the in-memory index's footprint for
// 1e6 needles; the target is <= 12 bytes per needle.
func BenchmarkIndexBytesPerNeedle(b *testing.B) {
	b.Run("sequential", func(b *testing.B) { indexBytesPerNeedle(b, 1) })
	b.Run("stride7", func(b *testing.B) { indexBytesPerNeedle(b, 7) })
}

func BenchmarkIndexGet(b *testing.B) {
	x := newNeedleIndex()
	for k := uint64(0); k < 1_000_000; k++ {
		x.set(k*3, indexEntry{off: uint32(k)})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		x.get(uint64(i%1_000_000) * 3)
	}
}
