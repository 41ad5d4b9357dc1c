package store

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/erasure"
	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/ttl"
	"github.com/kelpfs/kelp/internal/vfs"
)

// The EC benchmarks run on a real disk (a temporary directory, or one
// under KELP_EC_BENCH_DIR: /dev/shm measures the code without the disk).

// benchVolumeMB is the size of the volume the EC benchmarks encode
// (KELP_EC_BENCH_MB overrides it).
func benchVolumeMB() int {
	if n, err := strconv.Atoi(os.Getenv("KELP_EC_BENCH_MB")); err == nil && n > 0 {
		return n
	}
	return 256
}

// benchStore is a store on a real disk holding read-only volume 1, filled
// with needles of 64 KiB - 1 MiB, ~benchVolumeMB() MiB in all, fsync on.
func benchStore(b *testing.B) (*Store, int64) {
	b.Helper()
	dir := b.TempDir()
	if d := os.Getenv("KELP_EC_BENCH_DIR"); d != "" {
		var err error
		if dir, err = os.MkdirTemp(d, "ecbench"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
	}
	s, err := New(Config{Disks: []DiskConfig{{Dir: dir, MaxVolumes: 4}}, FS: vfs.OS(), Fsync: true, VolumeSizeLimit: 8 << 30})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if err := s.Allocate(1, "bench", replication.Code{}, ttl.TTL{}); err != nil {
		b.Fatal(err)
	}
	v, _ := s.Volume(1)
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	total := int64(benchVolumeMB()) << 20
	for key, written := uint64(1), int64(0); written < total; key++ {
		n := 64<<10 + rng.IntN(960<<10)
		if _, err := v.Write(context.Background(), needle.Meta{Key: key, Cookie: 7}, bytes.NewReader(buf[:n]), int64(n)); err != nil {
			b.Fatal(err)
		}
		written += int64(n)
	}
	if err := s.MarkReadOnly(1, true); err != nil {
		b.Fatal(err)
	}
	_, size, release, err := v.OpenData()
	if err != nil {
		b.Fatal(err)
	}
	release()
	return s, size
}

// BenchmarkEcEncode encodes a volume of a few hundred MB at 10+4 on a real
// disk through Store.EcEncode (read the .dat, encode, write and sync 14
// shard files and the index); MB/s is of the .dat.
func BenchmarkEcEncode(b *testing.B) {
	s, size := benchStore(b)
	b.SetBytes(size)
	b.ResetTimer()
	cpu0 := cpuTime()
	defer func() { reportCPU(b, cpu0, size) }()
	for range b.N {
		if err := s.EcEncode(context.Background(), 1, erasure.DefaultScheme, nil); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := s.EcUnmount(1, erasure.ShardSet(1<<14-1)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkEcRebuild rebuilds 4 of the 14 shards (two data, two parity)
// of such a volume from the 10 others on the same disk through
// Store.EcRebuild; MB/s is of the .dat (the volume made whole again).
func BenchmarkEcRebuild(b *testing.B) {
	s, size := benchStore(b)
	if err := s.EcEncode(context.Background(), 1, erasure.DefaultScheme, nil); err != nil {
		b.Fatal(err)
	}
	ev, _ := s.EcVolume(1)
	fetch := ev.LocalFetcher()
	lost := erasure.SetOf(0, 5, 10, 13)
	b.SetBytes(size)
	b.ResetTimer()
	cpu0 := cpuTime()
	defer func() { reportCPU(b, cpu0, size) }()
	for range b.N {
		b.StopTimer()
		if err := ev.Unmount(lost, true); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := s.EcRebuild(context.Background(), 1, "bench", lost, nil, fetch, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds "MB/cpu-s": MB of the .dat handled per CPU second of the
// whole process since start, a figure that a machine shared with other
// work does not distort the way wall-clock MB/s is.
func reportCPU(b *testing.B, start time.Duration, size int64) {
	if used := cpuTime() - start; used > 0 {
		b.ReportMetric(float64(size)*float64(b.N)/1e6/used.Seconds(), "MB/cpu-s")
	}
}
