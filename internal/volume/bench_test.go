package volume

import (
	"bytes"
	"context"
	"io"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/vfs"
)

// benchVolume creates a volume on the real file system, in the test's
// temporary directory (so the figures depend on what backs $TMPDIR).
func benchVolume(b *testing.B, fsync bool) *Volume {
	cfg := testConfig(vfs.OS())
	cfg.Dir = b.TempDir()
	cfg.Fsync = fsync
	cfg.CheckpointInterval = 0
	return create(b, cfg)
}

// benchWrites runs b.N 1 KiB writes from 16 concurrent writers.
func benchWrites(b *testing.B, fsync bool) { benchWritesOn(b, benchVolume(b, fsync), fsync) }

func benchWritesOn(b *testing.B, v *Volume, fsync bool) {
	defer v.Close()
	data := make([]byte, 1024)
	var next atomic.Uint64
	b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0))) // 16 concurrent writers
	b.SetBytes(1024)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			k := next.Add(1)
			if _, err := v.Write(context.Background(), needle.Meta{Key: k, Cookie: uint32(k)}, bytes.NewReader(data), 1024); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
	v.syncer.mu.Lock()
	if syncs := v.syncer.syncs; fsync && syncs > 0 {
		b.ReportMetric(float64(b.N)/float64(syncs), "writes/fsync")
		b.ReportMetric(float64(v.syncer.syncTime.Microseconds())/float64(syncs), "µs/fsync")
	}
	v.syncer.mu.Unlock()
}

func BenchmarkWrite1KiB16WritersFsync(b *testing.B)   { benchWrites(b, true) }
func BenchmarkWrite1KiB16WritersNoFsync(b *testing.B) { benchWrites(b, false) }

// BenchmarkWrite1KiB16WritersSimulatedFsync90us measures the engine alone
// against a disk whose fdatasync takes a fixed 90 µs (in-memory files, the
// sync delayed), so the figure does not depend on the shared test machine.
func BenchmarkWrite1KiB16WritersSimulatedFsync90us(b *testing.B) {
	fsys := vfs.NewFaulty(vfs.NewMem())
	fsys.Inject(vfs.Fault{Op: vfs.OpSync, Delay: 90 * time.Microsecond})
	cfg := testConfig(fsys)
	cfg.Fsync = true
	benchWritesOn(b, create(b, cfg), true)
}

func BenchmarkRead1KiB(b *testing.B) {
	v := benchVolume(b, false)
	defer v.Close()
	const n = 100_000
	data := make([]byte, 1024)
	for k := uint64(1); k <= n; k++ {
		if _, err := v.Write(context.Background(), needle.Meta{Key: k, Cookie: 1}, bytes.NewReader(data), 1024); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Uint64
	b.SetBytes(1024)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			k := next.Add(1)%n + 1
			o, err := v.Read(k, 1)
			if err != nil {
				b.Error(err)
				return
			}
			o.Close()
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
}

// BenchmarkReadLarge4MiB reads a 4 MiB needle through, as a GET does: from
// the page cache, checksums verified; the figure is the engine's cost per
// byte (copy and CRC).
func BenchmarkReadLarge4MiB(b *testing.B) {
	v := benchVolume(b, false)
	defer v.Close()
	data := make([]byte, 4<<20)
	if _, err := v.Write(context.Background(), needle.Meta{Key: 1, Cookie: 1}, bytes.NewReader(data), int64(len(data))); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		o, err := v.Read(1, 1)
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := o.Read(buf); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
		o.Close()
	}
}

// BenchmarkWriteLarge4MiB writes 4 MiB needles (no fsync): the engine's cost
// per byte (copy and CRC) on the streamed path.
func BenchmarkWriteLarge4MiB(b *testing.B) { benchWriteLarge(b, 4<<20) }

// BenchmarkWrite1MiB writes needles of 1 MiB of data (no fsync), the
// mount's and S3's common piece: built in memory (bufferedRecord).
func BenchmarkWrite1MiB(b *testing.B) { benchWriteLarge(b, 1<<20) }

func benchWriteLarge(b *testing.B, size int) {
	v := benchVolume(b, false)
	defer v.Close()
	data := make([]byte, size)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := range b.N {
		if _, err := v.Write(context.Background(), needle.Meta{Key: uint64(i + 1), Cookie: 1}, bytes.NewReader(data), int64(len(data))); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDiskFdatasync measures the disk under the benchmarks: one 1 KiB
// append and fdatasync per op. Group commit can at best reach
// writers / this latency.
func BenchmarkDiskFdatasync(b *testing.B) {
	f, err := vfs.OS().OpenFile(b.TempDir()+"/f", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1024)
	for i := 0; i < b.N; i++ {
		f.WriteAt(buf, int64(i)*1024)
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}
