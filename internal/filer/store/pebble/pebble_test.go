package pebble

import (
	"testing"

	"github.com/kelpfs/kelp/internal/filer/store"
	"github.com/kelpfs/kelp/internal/filer/store/storetest"
)

func backend(sync bool) storetest.Backend {
	return storetest.Backend{
		Fresh: func(tb testing.TB) storetest.Opener {
			dir := tb.TempDir()
			return func(tb testing.TB) store.Store {
				s, err := Open(dir, &Options{NoSync: !sync})
				if err != nil {
					tb.Fatal(err)
				}
				tb.Cleanup(func() { s.Close() })
				return s
			}
		},
	}
}

func TestConformance(t *testing.T) { storetest.Run(t, backend(false)) }

func BenchmarkStore(b *testing.B)       { storetest.Benchmark(b, backend(true)) }
func BenchmarkStoreNoSync(b *testing.B) { storetest.Benchmark(b, backend(false)) }
