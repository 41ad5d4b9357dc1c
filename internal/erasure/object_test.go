package erasure

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/vfs"
	"github.com/kelpfs/kelp/internal/volume"
)

// boundedFetch records the largest range any read asked for.
type boundedFetch struct {
	inner Fetcher
	mu    sync.Mutex
	most  int64
}

func (b *boundedFetch) Fetch(ctx context.Context, shard int, off, n int64, verify bool) ([]byte, error) {
	b.mu.Lock()
	b.most = max(b.most, n)
	b.mu.Unlock()
	return b.inner.Fetch(ctx, shard, off, n, verify)
}

// TestOpenStreamsLargeNeedles: a needle of several MiB is read from an EC
// volume in ranges of at most streamChunk (plus alignment), whole or
// from an offset, healthy and with its data shards lost (reconstructed).
func TestOpenStreamsLargeNeedles(t *testing.T) {
	fsys := vfs.NewMem()
	v, err := volume.Create(volume.Config{FS: fsys, Dir: "/d", ID: 3, Collection: "c", CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(9, 9))
	files := map[uint64][]byte{}
	for key := uint64(1); key <= 6; key++ {
		size := 100 + r.IntN(2000)
		if key%2 == 0 {
			size = 3<<20 + r.IntN(1<<20)
		}
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		if _, err := v.Write(context.Background(), needle.Meta{Key: key, Cookie: 5, Name: fmt.Sprint("f", key)}, bytes.NewReader(data), int64(size)); err != nil {
			t.Fatal(err)
		}
		files[key] = data
	}
	tv := &testVolume{fsys: fsys, dir: "/d", files: files, dat: v.Stats().Size}
	v.Close()
	ev := tv.encode(t, Scheme{Data: 4, Parity: 2})
	for _, lost := range []ShardSet{0, SetOf(0, 1), SetOf(2, 3), SetOf(1, 4)} {
		for key, want := range files {
			bf := &boundedFetch{inner: localFetch(ev, lost)}
			o, err := ev.Open(context.Background(), key, 5, bf, nil, time.Now())
			if err != nil {
				t.Fatalf("lost %v: open %d: %v", lost, key, err)
			}
			if o.Meta.Name != fmt.Sprint("f", key) || o.Size != int64(len(want)) {
				t.Fatalf("lost %v: needle %d: meta %+v size %d", lost, key, o.Meta, o.Size)
			}
			got, err := io.ReadAll(o)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("lost %v: needle %d: %d bytes, err %v", lost, key, len(got), err)
			}
			if len(want) > streamAbove {
				if o.Bytes() != nil {
					t.Fatalf("needle %d of %d bytes was read whole", key, len(want))
				}
				if bf.most > streamChunk+ReconstructWindow+BlockSize {
					t.Fatalf("needle %d: a range read of %d bytes", key, bf.most)
				}
				off := int64(len(want)/2 + 17)
				if _, err := o.Seek(off, io.SeekStart); err != nil {
					t.Fatal(err)
				}
				part := make([]byte, 10)
				if _, err := io.ReadFull(o, part); err != nil || !bytes.Equal(part, want[off:off+10]) {
					t.Fatalf("needle %d: range read %v", key, err)
				}
			}
		}
	}
	// Wrong cookie.
	if _, err := ev.Open(context.Background(), 2, 6, localFetch(ev, 0), nil, time.Now()); err == nil {
		t.Fatal("opened a large needle with the wrong cookie")
	}
}

// sinkFetch records what ReadRange reconstructed.
type sinkFetch struct {
	Fetcher
	got map[int][2]int64 // shard -> off, len
}

func (s *sinkFetch) Reconstructed(shard int, off int64, b []byte) {
	s.got[shard] = [2]int64{off, int64(len(b))}
}

// TestDegradedReadRebuildsWindow: a small needle of a lost shard is
// reconstructed with the ReconstructWindow around it (for the server's
// cache of rebuilt blocks), not just its own blocks.
func TestDegradedReadRebuildsWindow(t *testing.T) {
	tv := makeVolume(t, 300, 4)
	ev := tv.encode(t, Scheme{Data: 4, Parity: 2})
	l := ev.Layout()
	for key := range tv.files {
		e, _ := ev.Locate(key)
		x, _ := l.Locate(e.Offset, needle.RecordSize(e.Size))
		if len(x) != 1 || x[0].Len > BlockSize/2 {
			continue
		}
		sf := &sinkFetch{Fetcher: localFetch(ev, SetOf(x[0].Shard)), got: map[int][2]int64{}}
		if _, _, err := ev.Read(context.Background(), key, uint32(key*3), sf, nil, time.Now()); err != nil {
			t.Fatal(err)
		}
		g, ok := sf.got[x[0].Shard]
		// The window around the needle's start, or further to the end of
		// the needle's last block when it runs past the window.
		wantOff := x[0].Off / ReconstructWindow * ReconstructWindow
		needleEnd := (x[0].Off + x[0].Len + BlockSize - 1) / BlockSize * BlockSize
		wantLen := min(max(ReconstructWindow, needleEnd-wantOff), l.ShardSize-wantOff)
		if !ok || g[0] != wantOff || g[1] != wantLen {
			t.Fatalf("needle at shard %d offset %d (%d bytes): reconstructed %v, want %d+%d", x[0].Shard, x[0].Off, x[0].Len, g, wantOff, wantLen)
		}
		return
	}
	t.Fatal("no small needle found")
}

// lostSinkFetch is a sinkFetch that reports its lost shards and keeps the
// bytes it was given.
type lostSinkFetch struct {
	Fetcher
	lost  ShardSet
	bytes map[int][]byte
	off   map[int]int64
}

func (s *lostSinkFetch) UnavailableShards(context.Context) ShardSet { return s.lost }

func (s *lostSinkFetch) Reconstructed(shard int, off int64, b []byte) {
	s.bytes[shard], s.off[shard] = b, off
}

// TestDegradedReadRebuildsOtherLostShards: the k range reads that rebuild
// a window of a lost data shard rebuild the same window of the other lost
// data shards (a dead server held several), byte for byte, for the sink's
// cache; lost parity shards are not rebuilt (reads never need them).
func TestDegradedReadRebuildsOtherLostShards(t *testing.T) {
	tv := makeVolume(t, 300, 4)
	s := Scheme{Data: 4, Parity: 3}
	ev := tv.encode(t, s)
	l := ev.Layout()
	for key := range tv.files {
		e, _ := ev.Locate(key)
		x, _ := l.Locate(e.Offset, needle.RecordSize(e.Size))
		if len(x) != 1 || x[0].Len > BlockSize/2 {
			continue
		}
		other := (x[0].Shard + 1) % s.Data
		lost := SetOf(x[0].Shard, other, s.Data) // two data shards, one parity
		sf := &lostSinkFetch{Fetcher: localFetch(ev, lost), lost: lost, bytes: map[int][]byte{}, off: map[int]int64{}}
		rec, _, err := ev.Read(context.Background(), key, uint32(key*3), sf, nil, time.Now())
		if err != nil || !bytes.Equal(rec.Data, tv.files[key]) {
			t.Fatalf("degraded read: %v", err)
		}
		if _, ok := sf.bytes[s.Data]; ok {
			t.Fatal("a parity shard was rebuilt for a read")
		}
		for _, sh := range []int{x[0].Shard, other} {
			b, ok := sf.bytes[sh]
			if !ok {
				t.Fatalf("shard %d not rebuilt (lost: %v)", sh, lost)
			}
			want, err := ev.ReadLocal(sh, sf.off[sh], int64(len(b)), true)
			if err != nil || !bytes.Equal(b, want) {
				t.Fatalf("shard %d rebuilt wrong: %v", sh, err)
			}
		}
		return
	}
	t.Fatal("no small needle found")
}
