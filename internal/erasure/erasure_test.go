package erasure

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/vfs"
	"github.com/kelpfs/kelp/internal/volume"
)

func TestParseScheme(t *testing.T) {
	for _, ok := range []string{"10+4", "6+3", "4+2", "8+4", "1+1", " 28+4 "} {
		if _, err := ParseScheme(ok); err != nil {
			t.Errorf("ParseScheme(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "10", "10+0", "0+4", "30+3", "a+b", "10+-1", "10+4+1"} {
		if _, err := ParseScheme(bad); !errors.Is(err, ErrBadScheme) {
			t.Errorf("ParseScheme(%q) = %v, want ErrBadScheme", bad, err)
		}
	}
}

// TestLayoutArithmetic checks, for many sizes and schemes, that shards are
// whole blocks, cover the .dat with at most k*BlockSize of padding, and that
// Locate splits any range into contiguous pieces of the right shards.
func TestLayoutArithmetic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range []Scheme{{10, 4}, {6, 3}, {4, 2}, {8, 4}, {1, 1}} {
		for range 200 {
			size := r.Int64N(64<<20) + needle.SuperblockSize
			l := NewLayout(s, size)
			if l.ShardSize%BlockSize != 0 || l.ShardSize*int64(s.Data) < size {
				t.Fatalf("%v size %d: shard size %d", s, size, l.ShardSize)
			}
			if pad := l.ShardSize*int64(s.Data) - size; pad >= int64(s.Data)*BlockSize+BlockSize {
				t.Fatalf("%v size %d: %d bytes of padding", s, size, pad)
			}
			off := r.Int64N(size)
			n := r.Int64N(size - off + 1)
			exts, err := l.Locate(off, n)
			if err != nil {
				t.Fatal(err)
			}
			pos := off
			for _, e := range exts {
				if e.DatOff != pos || int64(e.Shard)*l.ShardSize+e.Off != pos || e.Off+e.Len > l.ShardSize || e.Len <= 0 {
					t.Fatalf("%v size %d range %d+%d: bad extent %+v", s, size, off, n, e)
				}
				pos += e.Len
			}
			if pos != off+n {
				t.Fatalf("extents end at %d, want %d", pos, off+n)
			}
			// A range that does not cross a multiple of ShardSize is one extent.
			if n > 0 && off/l.ShardSize == (off+n-1)/l.ShardSize && len(exts) != 1 {
				t.Fatalf("range inside one shard split into %d extents", len(exts))
			}
		}
		if _, err := NewLayout(s, 1000).Locate(990, 20); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("range past the end: %v", err)
		}
	}
}

type testVolume struct {
	fsys  vfs.FS
	dir   string
	files map[uint64][]byte
	dat   int64
}

// makeVolume writes n needles of random sizes (some large, some deleted,
// some overwritten) into a volume and closes it.
func makeVolume(t testing.TB, n int, seed uint64) *testVolume {
	return makeVolumeOn(t, vfs.NewMem(), "/d", n, seed)
}

func makeVolumeOn(t testing.TB, fsys vfs.FS, dir string, n int, seed uint64) *testVolume {
	t.Helper()
	cfg := volume.Config{FS: fsys, Dir: dir, ID: 3, Collection: "c", CheckpointInterval: -1}
	v, err := volume.Create(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 7))
	tv := &testVolume{fsys: fsys, dir: dir, files: map[uint64][]byte{}}
	for i := range n {
		key := uint64(i + 1)
		size := 1 + r.IntN(8192)
		if i%97 == 5 {
			size = 100<<10 + r.IntN(300<<10) // some cross shard boundaries
		}
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		if _, err := v.Write(context.Background(), needle.Meta{Key: key, Cookie: uint32(key * 3), Name: fmt.Sprint("f", key)}, bytes.NewReader(data), int64(size)); err != nil {
			t.Fatal(err)
		}
		tv.files[key] = data
		if i%13 == 0 {
			if _, err := v.Delete(context.Background(), key, uint32(key*3)); err != nil {
				t.Fatal(err)
			}
			delete(tv.files, key)
		}
	}
	tv.dat = v.Stats().Size
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	return tv
}

func (tv *testVolume) encode(t testing.TB, s Scheme) *Volume {
	t.Helper()
	f, err := vfs.Open(tv.fsys, "/d/c_3.dat")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := Encode(context.Background(), tv.fsys, f, tv.dat, "/d", "c_3", 3, s, nil); err != nil {
		t.Fatal(err)
	}
	ev, err := OpenVolume(tv.fsys, "/d", "c", 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ev.Close() })
	return ev
}

// localFetch reads shards of ev, except the ones in lost.
func localFetch(ev *Volume, lost ShardSet) Fetcher {
	return FetchFunc(func(ctx context.Context, shard int, off, n int64, verify bool) ([]byte, error) {
		if lost.Has(shard) {
			return nil, ErrShardUnavailable
		}
		return ev.ReadLocal(shard, off, n, verify)
	})
}

func checkAll(t *testing.T, ev *Volume, tv *testVolume, fetch Fetcher) {
	t.Helper()
	for key, want := range tv.files {
		rec, _, err := ev.Read(context.Background(), key, uint32(key*3), fetch, nil, time.Now())
		if err != nil {
			t.Fatalf("read %x: %v", key, err)
		}
		if !bytes.Equal(rec.Data, want) {
			t.Fatalf("read %x: %d bytes differ from the %d written", key, len(rec.Data), len(want))
		}
	}
}

// TestEncodeLoseAnyM encodes a volume under each scheme, then reads every
// file with no shard lost, with m shards lost (several choices, data and
// parity), and fails cleanly with m+1 lost.
func TestEncodeLoseAnyM(t *testing.T) {
	tv := makeVolume(t, 300, 1)
	r := rand.New(rand.NewPCG(3, 4))
	for _, s := range []Scheme{{10, 4}, {6, 3}, {4, 2}} {
		t.Run(s.String(), func(t *testing.T) {
			ev := tv.encode(t, s)
			if got := ev.Shards(); got.Count() != s.Total() {
				t.Fatalf("shards held: %v", got)
			}
			checkAll(t, ev, tv, localFetch(ev, 0))
			losses := []ShardSet{ShardSet(1<<s.Parity - 1), ShardSet((1<<s.Parity - 1) << s.Data)}
			for range 3 {
				var lost ShardSet
				for lost.Count() < s.Parity {
					lost = lost.With(r.IntN(s.Total()))
				}
				losses = append(losses, lost)
			}
			for _, lost := range losses {
				checkAll(t, ev, tv, localFetch(ev, lost))
			}
			var tooMany ShardSet = 1<<(s.Parity+1) - 1
			for key := range tv.files {
				e, _ := ev.Locate(key)
				if x, _ := ev.Layout().Locate(e.Offset, 1); !tooMany.Has(x[0].Shard) {
					continue
				}
				_, _, err := ev.Read(context.Background(), key, uint32(key*3), localFetch(ev, tooMany), nil, time.Now())
				if !errors.Is(err, ErrTooFewShards) {
					t.Fatalf("read with %d shards lost: %v", s.Parity+1, err)
				}
				break
			}
			for i := range s.Total() {
				if err := ev.Unmount(SetOf(i), true); err != nil {
					t.Fatal(err)
				}
			}
			tv.fsys.Remove("/d/c_3.ecx")
		})
	}
}

// TestCorruptShardDetected flips bytes of a data shard under a needle: the
// read still returns the right bytes (rebuilt from the others) and names the
// bad shard; a verified read of that block fails.
func TestCorruptShardDetected(t *testing.T) {
	tv := makeVolume(t, 200, 2)
	ev := tv.encode(t, Scheme{4, 2})
	var key uint64
	for k := range tv.files {
		key = k
		break
	}
	e, err := ev.Locate(key)
	if err != nil {
		t.Fatal(err)
	}
	exts, _ := ev.Layout().Locate(e.Offset+needle.HeaderSize+40, 1)
	x := exts[0]
	path := filepath.Join("/d", ShardName("c_3", x.Shard))
	f, err := tv.fsys.OpenFile(path, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0xde, 0xad}, x.Off)
	f.Close()
	if err := ev.Mount(SetOf(x.Shard)); err != nil { // reopen the damaged file
		t.Fatal(err)
	}
	rec, bad, err := ev.Read(context.Background(), key, uint32(key*3), localFetch(ev, 0), nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rec.Data, tv.files[key]) {
		t.Fatal("reconstructed bytes differ")
	}
	if !bad.Has(x.Shard) {
		t.Fatalf("bad shards %v, want %d among them", bad, x.Shard)
	}
	start, end := alignBlocks(x.Off, 1)
	if _, err := ev.ReadLocal(x.Shard, start, end-start, true); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("verified read of the damaged block: %v", err)
	}
	if err := ev.VerifyShards(SetOf(x.Shard)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("VerifyShards: %v", err)
	}
}

// TestRebuildAndDecode drops m shards, rebuilds them from the rest (equal to
// the originals, byte for byte), and decodes the .dat back.
func TestRebuildAndDecode(t *testing.T) {
	tv := makeVolume(t, 300, 3)
	s := Scheme{6, 3}
	ev := tv.encode(t, s)
	lost := SetOf(0, 4, 7)
	orig := map[int][]byte{}
	for _, i := range lost.List() {
		b, err := vfs.ReadFile(tv.fsys, filepath.Join("/d", ShardName("c_3", i)))
		if err != nil {
			t.Fatal(err)
		}
		orig[i] = b
	}
	if err := ev.Unmount(lost, true); err != nil {
		t.Fatal(err)
	}
	if err := Rebuild(context.Background(), tv.fsys, "/d", "c_3", 3, ev.Layout(), localFetch(ev, 0), lost, nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, i := range lost.List() {
		b, _ := vfs.ReadFile(tv.fsys, filepath.Join("/d", ShardName("c_3", i)))
		if !bytes.Equal(b, orig[i]) {
			t.Fatalf("rebuilt shard %d differs", i)
		}
	}
	if err := ev.Mount(lost); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Decode(context.Background(), ev.Layout(), localFetch(ev, SetOf(1, 2)), &out, nil); err != nil {
		t.Fatal(err)
	}
	dat, _ := vfs.ReadFile(tv.fsys, "/d/c_3.dat")
	if !bytes.Equal(out.Bytes(), dat) {
		t.Fatalf("decoded .dat (%d bytes) differs from the original (%d)", out.Len(), len(dat))
	}
}

// TestDeleteJournal: deletes survive a reopen, and a torn journal tail is cut.
func TestDeleteJournal(t *testing.T) {
	tv := makeVolume(t, 50, 4)
	ev := tv.encode(t, Scheme{4, 2})
	var keys []uint64
	for k := range tv.files {
		keys = append(keys, k)
	}
	for _, k := range keys[:3] {
		if err := ev.Delete(k); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := ev.Read(context.Background(), keys[0], uint32(keys[0]*3), localFetch(ev, 0), nil, time.Now()); !errors.Is(err, volume.ErrDeleted) {
		t.Fatalf("read of a deleted needle: %v", err)
	}
	ev.Close()
	f, _ := tv.fsys.OpenFile("/d/c_3.ecj", 2, 0)
	size, _ := f.Size()
	f.WriteAt([]byte{1, 2, 3, 4, 5}, size) // a torn record
	f.Close()
	ev2, err := OpenVolume(tv.fsys, "/d", "c", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer ev2.Close()
	if got := ev2.Deleted(); len(got) != 3 {
		t.Fatalf("deleted after reopen: %v", got)
	}
	if _, err := ev2.Locate(keys[3]); err != nil {
		t.Fatalf("live needle: %v", err)
	}
}

func FuzzParseIndex(f *testing.F) {
	x := &Index{Layout: NewLayout(Scheme{4, 2}, 100000), Superblock: make([]byte, 32),
		Entries: []needle.IndexEntry{{Key: 1, Offset: 32, Size: 40}, {Key: 9, Offset: 96, Size: 100}}}
	f.Add(x.Marshal())
	f.Add([]byte("KECX"))
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := ParseIndex(b)
		if err != nil {
			return
		}
		if !bytes.Equal(x.Marshal(), b) {
			t.Fatal("parsed index does not marshal back to its input")
		}
	})
}

func FuzzParseJournal(f *testing.F) {
	f.Add(AppendJournal(AppendJournal(nil, 5), 7))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, valid := ParseJournal(b)
		if valid > len(b) || valid != len(keys)*journalEntrySize {
			t.Fatalf("valid %d of %d bytes for %d keys", valid, len(b), len(keys))
		}
		var re []byte
		for _, k := range keys {
			re = AppendJournal(re, k)
		}
		if !bytes.Equal(re, b[:valid]) {
			t.Fatal("journal does not re-encode to its prefix")
		}
	})
}

func FuzzShardFooter(f *testing.F) {
	l := NewLayout(Scheme{10, 4}, 5<<20)
	f.Add(ShardFooter{Shard: 3, Scheme: l.Scheme, Layout: l, VolumeID: 9}.marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		ft, err := parseShardFooter(b)
		if err != nil {
			return
		}
		if !bytes.Equal(ft.marshal(), b) {
			t.Fatal("footer does not marshal back")
		}
	})
}

// BenchmarkEncode measures encoding a ~60 MB volume on the real file system
// (issue 11 asks for >= 300 MB/s on one server).
func BenchmarkEncode(b *testing.B) {
	dir := b.TempDir()
	tv := makeVolumeOn(b, vfs.OS(), dir, 3000, 5)
	b.SetBytes(tv.dat)
	for b.Loop() {
		f, _ := vfs.Open(tv.fsys, filepath.Join(dir, "c_3.dat"))
		if _, err := Encode(context.Background(), tv.fsys, f, tv.dat, dir, "c_3", 3, DefaultScheme, nil); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// smallFilesVolume writes about size bytes of 1-8 KiB needles.
func smallFilesVolume(b *testing.B, dir string, size int64) *testVolume {
	fsys := vfs.OS()
	v, err := volume.Create(volume.Config{FS: fsys, Dir: dir, ID: 3, Collection: "c", CheckpointInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(9, 9))
	buf := make([]byte, 8192)
	for key := uint64(1); v.Stats().Size < size; key++ {
		n := 1024 + r.IntN(7*1024)
		if _, err := v.Write(context.Background(), needle.Meta{Key: key, Cookie: 1}, bytes.NewReader(buf[:n]), int64(n)); err != nil {
			b.Fatal(err)
		}
	}
	tv := &testVolume{fsys: fsys, dir: dir, dat: v.Stats().Size}
	v.Close()
	return tv
}

// BenchmarkSpace30MB encodes a 30 MB volume of 1-8 KiB files at 10+4 and
// reports the disk used afterwards (all shard files, plus one .ecx per
// holder for 4 holders) relative to the .dat: issue 11 asks for <= 1.45.
func BenchmarkSpace30MB(b *testing.B) {
	dir := b.TempDir()
	tv := smallFilesVolume(b, dir, 30<<20)
	b.SetBytes(tv.dat)
	var ratio float64
	for b.Loop() {
		f, _ := vfs.Open(tv.fsys, filepath.Join(dir, "c_3.dat"))
		x, err := Encode(context.Background(), tv.fsys, f, tv.dat, dir, "c_3", 3, DefaultScheme, nil)
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		used := int64(DefaultScheme.Total())*ShardFileSize(x.Layout) + 4*int64(len(x.Marshal()))
		ratio = float64(used) / float64(tv.dat)
	}
	b.ReportMetric(ratio, "disk/data")
}

// BenchmarkRebuild rebuilds 4 lost shards of a 30 MB volume on one server
// (issue 11 asks for >= 300 MB/s); bytes are those of the volume.
func BenchmarkRebuild(b *testing.B) {
	dir := b.TempDir()
	tv := smallFilesVolume(b, dir, 30<<20)
	f, _ := vfs.Open(tv.fsys, filepath.Join(dir, "c_3.dat"))
	if _, err := Encode(context.Background(), tv.fsys, f, tv.dat, dir, "c_3", 3, DefaultScheme, nil); err != nil {
		b.Fatal(err)
	}
	f.Close()
	ev, err := OpenVolume(tv.fsys, dir, "c", 3)
	if err != nil {
		b.Fatal(err)
	}
	defer ev.Close()
	lost := SetOf(0, 3, 11, 13)
	b.SetBytes(tv.dat)
	for b.Loop() {
		if err := ev.Unmount(lost, true); err != nil {
			b.Fatal(err)
		}
		if err := Rebuild(context.Background(), tv.fsys, dir, "c_3", 3, ev.Layout(), localFetch(ev, 0), lost, nil, nil); err != nil {
			b.Fatal(err)
		}
		if err := ev.Mount(lost); err != nil {
			b.Fatal(err)
		}
	}
}

// batchLocal is a BatchFetcher over local shards that counts batches.
type batchLocal struct {
	Fetcher
	ev      *Volume
	lost    ShardSet
	batches int
}

func (b *batchLocal) FetchVerified(ctx context.Context, shards []int, off, n int64) ([][]byte, []error) {
	b.batches++
	got := make([][]byte, len(shards))
	errs := make([]error, len(shards))
	for i, s := range shards {
		got[i], errs[i] = b.Fetcher.Fetch(ctx, s, off, n, true)
	}
	return got, errs
}

// TestReconstructUsesBatches: a fetcher that reads several shards at once
// is asked once per wave, and reads still come back right with m lost.
func TestReconstructUsesBatches(t *testing.T) {
	tv := makeVolume(t, 100, 6)
	ev := tv.encode(t, Scheme{4, 2})
	lost := SetOf(0, 1)
	b := &batchLocal{Fetcher: localFetch(ev, lost), ev: ev, lost: lost}
	checkAll(t, ev, tv, b)
	if b.batches == 0 {
		t.Fatal("Reconstruct never used FetchVerified")
	}
}
