package storetest

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/kelpfs/kelp/internal/filer/store"
)

// benchKey spreads keys over the key space the way hashed directory ids
// would, so that neither end of the tree is hot.
func benchKey(i int) []byte {
	return binary.BigEndian.AppendUint64([]byte("bench/"), uint64(i)*0x9e3779b97f4a7c15)
}

// Benchmark measures single-key Update (Put), Get and 100-pair Scans, and
// Updates from parallel goroutines, reporting operations per second.
func Benchmark(b *testing.B, be Backend) {
	val := make([]byte, 200) // about one directory entry with a few chunks
	ctx := context.Background()
	preload := func(b *testing.B, s store.Store, n int) {
		for i := 0; i < n; i += 500 {
			err := s.Update(ctx, func(tx store.Tx) error {
				for j := i; j < i+500 && j < n; j++ {
					if err := tx.Put(benchKey(j), val); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	perSec := func(b *testing.B, ops float64) {
		b.ReportMetric(ops/b.Elapsed().Seconds(), "ops/s")
	}
	b.Run("Put", func(b *testing.B) {
		s := be.Fresh(b)(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			put(b, s, benchKey(i), val)
		}
		perSec(b, float64(b.N))
	})
	b.Run("PutParallel", func(b *testing.B) {
		s := be.Fresh(b)(b)
		var next atomic.Uint64
		b.SetParallelism(4)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := next.Add(1)
				err := s.Update(ctx, func(tx store.Tx) error { return tx.Put(benchKey(int(i)), val) })
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
		perSec(b, float64(b.N))
	})
	const loaded = 10000
	b.Run("Get", func(b *testing.B) {
		s := be.Fresh(b)(b)
		preload(b, s, loaded)
		rng := rand.New(rand.NewPCG(3, 4))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := s.Get(ctx, benchKey(rng.IntN(loaded))); err != nil {
				b.Fatal(err)
			}
		}
		perSec(b, float64(b.N))
	})
	b.Run("Scan100", func(b *testing.B) {
		s := be.Fresh(b)(b)
		preload(b, s, loaded)
		rng := rand.New(rand.NewPCG(5, 6))
		b.ResetTimer()
		pairs := 0
		for i := 0; i < b.N; i++ {
			start := binary.BigEndian.AppendUint64([]byte("bench/"), rng.Uint64())
			err := s.Scan(ctx, start, nil, 100, func(k, v []byte) error { pairs++; return nil })
			if err != nil {
				b.Fatal(err)
			}
		}
		perSec(b, float64(b.N))
		b.ReportMetric(float64(pairs)/b.Elapsed().Seconds(), "pairs/s")
	})
}
