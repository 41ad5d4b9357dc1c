package fsview

import (
	"bytes"
	"context"
	"log/slog"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/testcluster"
)

func cachedView(t *testing.T, s *filerserver.Server, dir string, size int64) *FS {
	t.Helper()
	fs, err := New(context.Background(), Config{Filer: s.GRPCAddr(), Logger: slog.New(slog.DiscardHandler),
		CacheDir: dir, CacheSize: size})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	return fs
}

func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		info, err := de.Info()
		if err != nil {
			t.Fatal(err)
		}
		n += info.Size()
	}
	return n
}

// The chunk cache serves a re-read with the volume server stopped, after a
// restart of the view, and never holds more than its size.
func TestChunkCacheServesRereadsWithoutTheVolumeServerAndStaysUnderItsSize(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}}})
	s, err := filerserver.New(filerserver.Config{Masters: c.MasterAddrs(), Dir: t.TempDir(), ChunkSize: 64 << 10,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	rng := rand.New(rand.NewSource(3))
	f1, f2 := make([]byte, 200<<10), make([]byte, 200<<10)
	rng.Read(f1)
	rng.Read(f2)
	w := newView(t, s)
	writeFile(t, w, "/f1", f1)
	writeFile(t, w, "/f2", f2)

	dir := filepath.Join(t.TempDir(), "cache")
	const limit = 300 << 10
	a := cachedView(t, s, dir, limit)
	if got := readFile(t, a, "/f1"); !bytes.Equal(got, f1) {
		t.Fatal("f1 read through the cache differs")
	}
	if got := readFile(t, a, "/f2"); !bytes.Equal(got, f2) {
		t.Fatal("f2 read through the cache differs")
	}
	if u := a.chunks.used(); u > limit || u < 200<<10 {
		t.Fatalf("cache holds %d bytes, want between 200 KiB and %d", u, limit)
	}
	if n := dirBytes(t, dir); n > limit {
		t.Fatalf("cache directory holds %d bytes, over the limit %d", n, limit)
	}
	if a.chunks.misses.Load() == 0 {
		t.Fatal("the first reads did not go to the volume server")
	}
	a.Close()

	c.Volume[0].Stop()
	b := cachedView(t, s, dir, limit) // a restarted mount reuses what is there
	if got := readFile(t, b, "/f2"); !bytes.Equal(got, f2) {
		t.Fatal("f2 re-read from the cache differs")
	}
	if m := b.chunks.misses.Load(); m != 0 {
		t.Fatalf("the re-read missed the cache %d times", m)
	}
	if b.chunks.hits.Load() == 0 {
		t.Fatal("the re-read did not use the cache")
	}
	// A smaller cache over the same directory evicts down to its size.
	small := cachedView(t, s, dir, 100<<10)
	if n := dirBytes(t, dir); n > 100<<10 || small.chunks.used() > 100<<10 {
		t.Fatalf("after a restart with 100 KiB the cache holds %d bytes on disk", n)
	}
}

// A long write commits its finished uploads as it goes (more than
// maxPending chunks) and reads back whole, overwrites included.
func TestLongWriteCommitsAsItGoes(t *testing.T) {
	s := startFiler(t)
	fs := newView(t, s)
	ctx := context.Background()
	rng := rand.New(rand.NewSource(5))
	model := make([]byte, 20*(64<<10)+12345)
	rng.Read(model)
	h, err := fs.Create(ctx, "/long", os.O_RDWR|os.O_CREATE, 0o644, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(model); off += 16 << 10 {
		end := min(off+16<<10, len(model))
		if _, err := h.WriteAt(ctx, model[off:end], int64(off)); err != nil {
			t.Fatal(err)
		}
		if off > 200<<10 && rng.Intn(8) == 0 { // rewrite something written before
			o := rng.Intn(off - 1000)
			rng.Read(model[o : o+1000])
			if _, err := h.WriteAt(ctx, model[o:o+1000], int64(o)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, newView(t, s), "/long"); !bytes.Equal(got, model) {
		t.Fatalf("long write reads back %d bytes, differing from the %d written", len(got), len(model))
	}
}

// A sequential read of a file larger than the read-ahead runs on
// prefetches; a write in the middle of the reading is seen.
func TestSequentialReadWithPrefetchAndAWriteMeanwhile(t *testing.T) {
	s := startFiler(t)
	fs := newView(t, s)
	ctx := context.Background()
	rng := rand.New(rand.NewSource(6))
	model := make([]byte, 9<<20+777)
	rng.Read(model)
	writeFile(t, fs, "/big", model)
	r := newView(t, s)
	if got := readFile(t, r, "/big"); !bytes.Equal(got, model) {
		t.Fatal("a sequential read differs")
	}
	h, err := r.Open(ctx, "/big", os.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	buf := make([]byte, 100_000)
	var got []byte
	for off := int64(0); off < int64(len(model)); {
		if off > 3<<20 && off < 3<<20+100_000 { // ahead of the reader, inside the prefetched range
			w := []byte("written while reading")
			at := off + 2<<20
			copy(model[at:], w)
			if _, err := h.WriteAt(ctx, w, at); err != nil {
				t.Fatal(err)
			}
		}
		n, err := h.ReadAt(ctx, buf, off)
		got = append(got, buf[:n]...)
		off += int64(n)
		if err != nil {
			break
		}
	}
	if !bytes.Equal(got, model) {
		t.Fatal("the read with a write meanwhile differs")
	}
}
