package store

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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
//
// Before each encode it measures the disk's synced-write limit the way
// `dd if=/dev/zero bs=1M conv=fsync` does, writing as many bytes as the
// encode writes (disk-MB/s), so that a figure always comes with what the
// disk took at that time; write-MB/s is the shard bytes the encode wrote
// per second (at most disk-MB/s unless parallel writes beat one stream),
// MB/cpu-s is .dat MB per CPU second of the encodes alone.
func BenchmarkEcEncode(b *testing.B) {
	s, size := benchStore(b)
	written := int64(erasure.DefaultScheme.Total()) * erasure.ShardFileSize(erasure.NewLayout(erasure.DefaultScheme, size))
	dir := s.disks[0].Dir
	var disk benchDisk
	var cpu time.Duration
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		disk.probe(b, dir, written)
		cpu0 := cpuTime()
		b.StartTimer()
		if err := s.EcEncode(context.Background(), 1, erasure.DefaultScheme, nil); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += cpuTime() - cpu0
		if err := s.EcUnmount(1, erasure.ShardSet(1<<14-1)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	reportRates(b, size, written, cpu, disk)
}

// BenchmarkEcRebuild rebuilds 4 of the 14 shards (two data, two parity)
// of such a volume from the 10 others on the same disk through
// Store.EcRebuild; MB/s is of the .dat (the volume made whole again). The
// 10 shards read are dropped from the page cache before each rebuild (a
// rebuild reads shards nobody read lately), and the disk is probed as in
// BenchmarkEcEncode, for the bytes the rebuild writes.
func BenchmarkEcRebuild(b *testing.B) {
	s, size := benchStore(b)
	if err := s.EcEncode(context.Background(), 1, erasure.DefaultScheme, nil); err != nil {
		b.Fatal(err)
	}
	ev, _ := s.EcVolume(1)
	fetch := ev.LocalFetcher()
	lost := erasure.SetOf(0, 5, 10, 13)
	written := int64(len(lost.List())) * erasure.ShardFileSize(ev.Layout())
	var disk benchDisk
	var cpu time.Duration
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		if err := ev.Unmount(lost, true); err != nil {
			b.Fatal(err)
		}
		disk.probe(b, ev.Dir(), written)
		for _, i := range ev.Shards().List() {
			dropCache(b, filepath.Join(ev.Dir(), erasure.ShardName(ev.Base(), i)))
		}
		cpu0 := cpuTime()
		b.StartTimer()
		if err := s.EcRebuild(context.Background(), 1, "bench", lost, nil, fetch, nil); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += cpuTime() - cpu0
		b.StartTimer()
	}
	reportRates(b, size, written, cpu, disk)
}

// benchDisk sums the probes of the disk's synced-write speed.
type benchDisk struct {
	bytes int64
	took  time.Duration
}

// probe writes n bytes of zeros to a new file in dir in 1 MiB writes
// through the page cache and syncs it once (dd bs=1M conv=fsync), then
// removes it.
func (d *benchDisk) probe(b *testing.B, dir string, n int64) {
	b.Helper()
	path := filepath.Join(dir, "disk-probe")
	buf := make([]byte, 1<<20)
	start := time.Now()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	for left := n; left > 0; left -= int64(len(buf)) {
		if _, err := f.Write(buf[:min(left, int64(len(buf)))]); err != nil {
			b.Fatal(err)
		}
	}
	if err := syscall.Fdatasync(int(f.Fd())); err != nil {
		b.Fatal(err)
	}
	d.took += time.Since(start)
	d.bytes += n
	f.Close()
	if err := os.Remove(path); err != nil {
		b.Fatal(err)
	}
}

// dropCache evicts a file's pages from the page cache (they are clean).
func dropCache(b *testing.B, path string) {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		b.Fatal(err)
	}
}

// reportRates adds disk-MB/s (the probes), write-MB/s (shard bytes written
// per second of the timed work) and MB/cpu-s (.dat MB per CPU second of
// the timed work: a figure that a machine shared with other work distorts
// less than wall-clock MB/s).
func reportRates(b *testing.B, size, written int64, cpu time.Duration, disk benchDisk) {
	if disk.took > 0 {
		b.ReportMetric(float64(disk.bytes)/1e6/disk.took.Seconds(), "disk-MB/s")
	}
	if el := b.Elapsed(); el > 0 {
		b.ReportMetric(float64(written)*float64(b.N)/1e6/el.Seconds(), "write-MB/s")
	}
	if cpu > 0 {
		b.ReportMetric(float64(size)*float64(b.N)/1e6/cpu.Seconds(), "MB/cpu-s")
	}
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
