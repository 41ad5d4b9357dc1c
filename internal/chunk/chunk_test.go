package chunk_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/chunk/chunktest"
)

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func readAll(t *testing.T, m *chunktest.Mem, cs []chunk.Chunk, size int64) []byte {
	t.Helper()
	r := chunk.NewReader(context.Background(), m, cs, size)
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestSplitSizes(t *testing.T) {
	const cs = 1000
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, cs - 1, cs, cs + 1, 3*cs + 17} {
		for _, hint := range []int64{-1, int64(n), 5, int64(n) + 300} { // +300: a multipart form's length
			t.Run(strconv.Itoa(n)+"/hint"+strconv.FormatInt(hint, 10), func(t *testing.T) {
				m := chunktest.New()
				data := randBytes(rnd, n)
				res, err := chunk.Split(context.Background(), m, bytes.NewReader(data), 0, chunk.SplitOptions{ChunkSize: cs, SizeHint: hint})
				if err != nil {
					t.Fatal(err)
				}
				wantChunks := (n + cs - 1) / cs
				if len(res.Chunks) != wantChunks || res.Size != int64(n) {
					t.Fatalf("got %d chunks, size %d; want %d, %d", len(res.Chunks), res.Size, wantChunks, n)
				}
				sum := md5.Sum(data)
				if !bytes.Equal(res.MD5, sum[:]) {
					t.Fatal("md5 mismatch")
				}
				for i, c := range res.Chunks {
					if c.Offset != int64(i*cs) || c.Size > cs {
						t.Fatalf("chunk %d: %+v", i, c)
					}
				}
				if got := readAll(t, m, res.Chunks, res.Size); !bytes.Equal(got, data) {
					t.Fatal("content mismatch")
				}
			})
		}
	}
}

func TestSplitFailureReportsStoredChunks(t *testing.T) {
	m := chunktest.New()
	boom := errors.New("boom")
	m.FailPut = func(n int64) error {
		if n == 3 {
			return boom
		}
		return nil
	}
	data := make([]byte, 10*100)
	res, err := chunk.Split(context.Background(), m, bytes.NewReader(data), 0, chunk.SplitOptions{ChunkSize: 100, Concurrency: 1})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if len(res.Chunks) != 2 || len(m.Live()) != 2 {
		t.Fatalf("stored %d chunks, %d live; want 2", len(res.Chunks), len(m.Live()))
	}
}

// zeroReader yields n zero bytes without holding them.
type zeroReader struct{ n int64 }

func (z *zeroReader) Read(p []byte) (int, error) {
	if z.n == 0 {
		return 0, io.EOF
	}
	k := min(int64(len(p)), z.n)
	clear(p[:k])
	z.n -= k
	return int(k), nil
}

// discardBlobs stores nothing: it measures Split's own memory.
type discardBlobs struct{ n atomic.Int64 }

func (d *discardBlobs) Put(ctx context.Context, data []byte) (string, error) {
	return "1," + strconv.FormatInt(d.n.Add(1), 16) + "00000000", nil
}

// TestSplitLargeStreamBoundedMemory streams a large file through Split and
// checks that the heap stays within a few chunk buffers. 256 MiB by
// default; KELP_TEST_HUGE=1 with -short=false streams 1 GiB.
func TestSplitLargeStreamBoundedMemory(t *testing.T) {
	size := int64(256 << 20)
	if testing.Short() {
		size = 64 << 20
	}
	if os.Getenv("KELP_TEST_HUGE") == "1" && !testing.Short() {
		size = 1 << 30
	}
	const chunkSize = 8 << 20
	const conc = 4
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	stop := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		var maxHeap uint64
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				peak <- maxHeap
				return
			default:
			}
			runtime.ReadMemStats(&ms)
			maxHeap = max(maxHeap, ms.HeapAlloc)
			runtime.Gosched()
		}
	}()
	d := &discardBlobs{}
	res, err := chunk.Split(context.Background(), d, &zeroReader{n: size}, 0, chunk.SplitOptions{ChunkSize: chunkSize, Concurrency: conc})
	close(stop)
	maxHeap := <-peak
	if err != nil {
		t.Fatal(err)
	}
	if res.Size != size || int64(len(res.Chunks)) != size/chunkSize {
		t.Fatalf("size %d, %d chunks", res.Size, len(res.Chunks))
	}
	growth := int64(maxHeap) - int64(before.HeapAlloc)
	// Split keeps at most conc+1 buffers live; HeapAlloc also counts
	// buffers dropped but not yet collected, so allow two more. A leak
	// would grow with the stream (256 MiB), far past this.
	limit := int64((conc + 3) * chunkSize)
	t.Logf("streamed %d MiB, peak heap growth %.1f MiB (limit %d MiB)", size>>20, float64(growth)/(1<<20), limit>>20)
	if growth > limit {
		t.Fatalf("heap grew by %d bytes, more than %d", growth, limit)
	}
}

func TestSplitConcurrency(t *testing.T) {
	m := chunktest.New()
	_, err := chunk.Split(context.Background(), m, bytes.NewReader(make([]byte, 64*10)), 0, chunk.SplitOptions{ChunkSize: 10, Concurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.MaxInFlight.Load(); got > 3 {
		t.Fatalf("%d uploads in flight, limit 3", got)
	}
}

// TestRandomOverwrites writes random ranges (and extends the file) and
// compares every read with a reference buffer.
func TestRandomOverwrites(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 8))
	m := chunktest.New()
	ctx := context.Background()
	var ref []byte
	var cs []chunk.Chunk
	for round := 0; round < 300; round++ {
		off := rnd.Int64N(int64(len(ref)) + 500)
		data := randBytes(rnd, 1+rnd.IntN(700))
		res, err := chunk.Split(ctx, m, bytes.NewReader(data), off, chunk.SplitOptions{ChunkSize: 256})
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, res.Chunks...)
		if end := int(off) + len(data); end > len(ref) {
			ref = append(ref, make([]byte, end-len(ref))...)
		}
		copy(ref[off:], data)
		// Drop hidden chunks as the filer does; content must not change.
		hidden := chunk.Hidden(cs)
		keep := cs[:0:0]
		for _, c := range cs {
			drop := false
			for _, h := range hidden {
				drop = drop || h.FID == c.FID
			}
			if !drop {
				keep = append(keep, c)
			}
		}
		cs = keep
		size := int64(len(ref))
		if round%10 == 0 {
			if got := readAll(t, m, cs, size); !bytes.Equal(got, ref) {
				t.Fatalf("round %d: full read differs", round)
			}
		}
		r := chunk.NewReader(ctx, m, cs, size)
		for k := 0; k < 5; k++ {
			o := rnd.Int64N(size)
			n := rnd.Int64N(size-o) + 1
			buf := make([]byte, n)
			if _, err := r.ReadAt(buf, o); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf, ref[o:o+n]) {
				t.Fatalf("round %d: ReadAt(%d, %d) differs", round, o, n)
			}
			if _, err := r.Seek(o, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, n)
			if _, err := io.ReadFull(r, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, ref[o:o+n]) {
				t.Fatalf("round %d: Seek+Read(%d, %d) differs", round, o, n)
			}
		}
		r.Close()
	}
}

func TestSparseHolesReadAsZeros(t *testing.T) {
	m := chunktest.New()
	ctx := context.Background()
	res, err := chunk.Split(ctx, m, bytes.NewReader([]byte("abc")), 10, chunk.SplitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, m, res.Chunks, 20)
	want := append(append(make([]byte, 10), "abc"...), make([]byte, 7)...)
	if !bytes.Equal(got, want) {
		t.Fatalf("got %q", got)
	}
}

func TestVisibleShadowing(t *testing.T) {
	cs := []chunk.Chunk{
		{FID: "a", Offset: 0, Size: 100},
		{FID: "b", Offset: 20, Size: 10},
		{FID: "c", Offset: 90, Size: 20},
		{FID: "d", Offset: 25, Size: 70},
	}
	got := chunk.Visible(cs)
	want := []chunk.Interval{
		{Start: 0, Stop: 20, FID: "a"},
		{Start: 20, Stop: 25, FID: "b"},
		{Start: 25, Stop: 95, FID: "d"},
		{Start: 95, Stop: 110, FID: "c", ChunkOffset: 5},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		w := want[i]
		w.ChunkSize = got[i].ChunkSize // the blob's size: not what this test checks
		if !reflect.DeepEqual(got[i], w) {
			t.Fatalf("interval %d: got %+v want %+v", i, got[i], want[i])
		}
	}
	if h := chunk.Hidden(cs); len(h) != 0 {
		t.Fatalf("hidden %+v", h)
	}
	cs = append(cs, chunk.Chunk{FID: "e", Offset: 15, Size: 100})
	h := chunk.Hidden(cs)
	if len(h) != 3 || h[0].FID != "b" || h[1].FID != "c" || h[2].FID != "d" {
		t.Fatalf("hidden %+v", h)
	}
}

func TestManifestPackResolve(t *testing.T) {
	m := chunktest.New()
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(3, 4))
	data := randBytes(rnd, 10*57+3)
	res, err := chunk.Split(ctx, m, bytes.NewReader(data), 0, chunk.SplitOptions{ChunkSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	// An overwrite after the manifested chunks must still win.
	over, err := chunk.Split(ctx, m, bytes.NewReader([]byte("OVERWRITE")), 5, chunk.SplitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	all := append(res.Chunks, over.Chunks...)
	copy(data[5:], "OVERWRITE")
	packed, err := chunk.Pack(ctx, m, all, 20, 16)
	if err != nil {
		t.Fatal(err)
	}
	manifests := 0
	for _, c := range packed {
		if c.Manifest {
			manifests++
		}
	}
	if manifests != 3 || len(packed) != 3+(59-48) {
		t.Fatalf("%d manifests in %d chunks", manifests, len(packed))
	}
	if chunk.TotalSize(packed) != int64(len(data)) {
		t.Fatalf("span %d", chunk.TotalSize(packed))
	}
	resolved, err := chunk.Resolve(ctx, m, packed, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(resolved) != len(all) {
		t.Fatalf("resolved %d chunks, want %d", len(resolved), len(all))
	}
	if got := readAll(t, m, resolved, int64(len(data))); !bytes.Equal(got, data) {
		t.Fatal("content differs after pack/resolve")
	}
	// A range read skips manifests outside the range.
	before := m.Opens.Load()
	part, err := chunk.Resolve(ctx, m, packed, 500, 10)
	if err != nil {
		t.Fatal(err)
	}
	if m.Opens.Load()-before != 0 || len(part) != len(packed)-3 {
		t.Fatalf("range resolve opened %d manifests, kept %d chunks", m.Opens.Load()-before, len(part))
	}
}

func TestListRoundTripAndCorruption(t *testing.T) {
	key := bytes.Repeat([]byte{7}, chunk.KeySize)
	cs := []chunk.Chunk{{FID: "3,01637037d6", Offset: 5, Size: 8 << 20, Mtime: 1234567, ETag: "abcd"}, {FID: "4,1", Manifest: true}, {FID: "5,2", Size: 3, CipherKey: key}}
	b := chunk.AppendList(nil, cs)
	got, rest, err := chunk.ReadList(append(b, 'x'))
	if err != nil || len(rest) != 1 || !reflect.DeepEqual(got, cs) {
		t.Fatalf("got %+v rest %q err %v", got, rest, err)
	}
	for i := 0; i < len(b); i++ {
		if _, _, err := chunk.ReadList(b[:i]); !errors.Is(err, chunk.ErrCorrupt) {
			t.Fatalf("truncated at %d: err %v", i, err)
		}
	}
}

func FuzzReadList(f *testing.F) {
	f.Add(chunk.AppendList(nil, []chunk.Chunk{{FID: "1,2", Size: 3, ETag: "x"}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		cs, _, err := chunk.ReadList(b)
		if err != nil {
			return
		}
		again, _, err := chunk.ReadList(chunk.AppendList(nil, cs))
		if err != nil || len(again) != len(cs) {
			t.Fatalf("re-decode: %v", err)
		}
	})
}
