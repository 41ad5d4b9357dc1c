package store

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/erasure"
	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/ttl"
	"github.com/kelpfs/kelp/internal/vfs"
)

// TestEcEncodeCrash cuts the power at a random point of an encode, many
// times: afterwards the store holds the original volume with every file,
// and either no EC volume or a complete one (every shard there, every block
// intact, every file readable through it) — never a partial one.
func TestEcEncodeCrash(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	complete := 0
	for round := range 25 {
		fsys := vfs.NewCrash(int64(round), vfs.CrashOptions{Garbage: true})
		s, err := New(Config{Disks: []DiskConfig{{Dir: "/d", MaxVolumes: 4}}, FS: fsys, Fsync: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Allocate(7, "c", replication.Code{}, ttl.TTL{}); err != nil {
			t.Fatal(err)
		}
		v, _ := s.Volume(7)
		files := map[uint64][]byte{}
		for key := uint64(1); key <= 40; key++ {
			data := bytes.Repeat([]byte{byte(key)}, 500+int(key)*97)
			if _, err := v.Write(context.Background(), needle.Meta{Key: key, Cookie: 9}, bytes.NewReader(data), int64(len(data))); err != nil {
				t.Fatal(err)
			}
			files[key] = data
		}
		if err := s.MarkReadOnly(7, true); err != nil {
			t.Fatal(err)
		}
		fsys.CrashAfter(1 + rng.IntN(60))
		s.EcEncode(context.Background(), 7, erasure.Scheme{Data: 4, Parity: 2}, nil)
		after := fsys.Crash()

		s2, err := New(Config{Disks: []DiskConfig{{Dir: "/d", MaxVolumes: 4}}, FS: after, Fsync: true})
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		v2, ok := s2.Volume(7)
		if !ok {
			t.Fatalf("round %d: the original volume is gone", round)
		}
		for key, want := range files {
			o, err := v2.Read(key, 9)
			if err != nil {
				t.Fatalf("round %d: original needle %d: %v", round, key, err)
			}
			got, _ := io.ReadAll(o)
			o.Close()
			if !bytes.Equal(got, want) {
				t.Fatalf("round %d: original needle %d differs", round, key)
			}
		}
		if ev, ok := s2.EcVolume(7); ok {
			complete++
			if ev.Shards().Count() != 6 {
				t.Fatalf("round %d: EC volume with shards %v after a crash", round, ev.Shards())
			}
			if err := ev.VerifyShards(ev.Shards()); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			fetch := erasure.FetchFunc(func(ctx context.Context, shard int, off, n int64, verify bool) ([]byte, error) {
				return ev.ReadLocal(shard, off, n, verify)
			})
			for key, want := range files {
				rec, _, err := ev.Read(context.Background(), key, 9, fetch, nil, time.Now())
				if err != nil || !bytes.Equal(rec.Data, want) {
					t.Fatalf("round %d: EC needle %d: %v", round, key, err)
				}
			}
		}
		s2.Close()
	}
	t.Logf("%d of 25 crashes left a complete EC volume, the others none", complete)
}
