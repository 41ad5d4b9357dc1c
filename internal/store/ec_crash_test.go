package store

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/erasure"
	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/ttl"
	"github.com/kelpfs/kelp/internal/vfs"
	"github.com/kelpfs/kelp/internal/volume"
)

var crashScheme = erasure.Scheme{Data: 4, Parity: 2}

func crashStore(t *testing.T, fsys vfs.FS) *Store {
	t.Helper()
	s, err := New(Config{Disks: []DiskConfig{{Dir: "/d", MaxVolumes: 4}}, FS: fsys, Fsync: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// encodedStore is a store on fsys holding EC volume 7 (all 6 shards, the
// original volume deleted), with needle 3 deleted through the journal.
func encodedStore(t *testing.T, fsys vfs.FS) (*Store, map[uint64][]byte) {
	t.Helper()
	s := crashStore(t, fsys)
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
	if err := s.EcEncode(context.Background(), 7, crashScheme, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(7); err != nil {
		t.Fatal(err)
	}
	ev, _ := s.EcVolume(7)
	if err := ev.Delete(3); err != nil {
		t.Fatal(err)
	}
	delete(files, 3)
	return s, files
}

func localFetch(ev *erasure.Volume) erasure.Fetcher {
	return erasure.FetchFunc(func(ctx context.Context, shard int, off, n int64, verify bool) ([]byte, error) {
		return ev.ReadLocal(shard, off, n, verify)
	})
}

// checkEC: the store's EC volume 7 has exactly want (or, when alt is not
// 0, alt), every block intact, and serves every live file and 404s needle 3.
func checkEC(t *testing.T, round int, s *Store, files map[uint64][]byte, want, alt erasure.ShardSet) {
	t.Helper()
	ev, ok := s.EcVolume(7)
	if !ok {
		t.Fatalf("round %d: the EC volume is gone", round)
	}
	if got := ev.Shards(); got != want && (alt == 0 || got != alt) {
		t.Fatalf("round %d: shards %v after a crash, want %v or %v", round, got, want, alt)
	}
	if err := ev.VerifyShards(ev.Shards()); err != nil {
		t.Fatalf("round %d: %v", round, err)
	}
	for key, want := range files {
		rec, _, err := ev.Read(context.Background(), key, 9, localFetch(ev), nil, time.Now())
		if err != nil || !bytes.Equal(rec.Data, want) {
			t.Fatalf("round %d: EC needle %d: %v", round, key, err)
		}
	}
	if _, _, err := ev.Read(context.Background(), 3, 9, localFetch(ev), nil, time.Now()); !errors.Is(err, volume.ErrDeleted) {
		t.Fatalf("round %d: deleted EC needle: %v", round, err)
	}
}

// TestEcRebuildCrash cuts the power at a random point of a rebuild of two
// lost shards: afterwards the EC volume has the shards it had, or all of
// them, each intact, and every file reads.
func TestEcRebuildCrash(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	rebuilt := 0
	for round := range 25 {
		fsys := vfs.NewCrash(int64(round), vfs.CrashOptions{Garbage: true})
		s, files := encodedStore(t, fsys)
		lost := erasure.SetOf(1, 4)
		if err := s.EcUnmount(7, lost); err != nil {
			t.Fatal(err)
		}
		ev, _ := s.EcVolume(7)
		left := ev.Shards()
		fsys.CrashAfter(1 + rng.IntN(40))
		s.EcRebuild(context.Background(), 7, "c", lost, nil, localFetch(ev), nil)
		after := fsys.Crash()
		s2 := crashStore(t, after)
		checkEC(t, round, s2, files, left, left|lost)
		if ev2, _ := s2.EcVolume(7); ev2.Shards() == left|lost {
			rebuilt++
		}
		s2.Close()
	}
	t.Logf("%d of 25 crashes left the rebuilt shards, the others the shards before", rebuilt)
}

// TestEcDecodeCrash cuts the power at a random point of a decode: the EC
// volume stays whole, and a normal volume 7 is there only complete, with
// the needle deleted from the EC volume deleted in it too.
func TestEcDecodeCrash(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	decoded := 0
	for round := range 25 {
		fsys := vfs.NewCrash(int64(round), vfs.CrashOptions{Garbage: true})
		s, files := encodedStore(t, fsys)
		ev, _ := s.EcVolume(7)
		fsys.CrashAfter(1 + rng.IntN(40))
		s.EcDecode(context.Background(), 7, "c", localFetch(ev))
		after := fsys.Crash()
		s2 := crashStore(t, after)
		all := erasure.SetOf(0, 1, 2, 3, 4, 5)
		checkEC(t, round, s2, files, all, 0)
		if v, ok := s2.Volume(7); ok {
			decoded++
			for key, want := range files {
				o, err := v.Read(key, 9)
				if err != nil {
					t.Fatalf("round %d: decoded needle %d: %v", round, key, err)
				}
				got, _ := io.ReadAll(o)
				o.Close()
				if !bytes.Equal(got, want) {
					t.Fatalf("round %d: decoded needle %d differs", round, key)
				}
			}
			if _, err := v.Read(3, 9); err == nil {
				t.Fatalf("round %d: the decoded volume serves a needle deleted before the decode", round)
			}
		}
		s2.Close()
	}
	t.Logf("%d of 25 crashes left a decoded volume, the others none", decoded)
}

// TestEcImportCrash cuts the power at a random point of a shard copy to a
// server that has no part of the volume: afterwards it has the copied
// shards, complete and intact, or no shard at all.
func TestEcImportCrash(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	src, files := encodedStore(t, vfs.NewMem())
	source := func(ctx context.Context, ext string, w io.Writer) error {
		f, err := src.EcFile(7, ext)
		if err != nil {
			return err
		}
		defer f.Close()
		size, err := f.Size()
		if err != nil {
			return err
		}
		_, err = io.Copy(w, io.NewSectionReader(f, 0, size))
		return err
	}
	copied := 0
	want := erasure.SetOf(0, 1, 2, 3)
	for round := range 25 {
		fsys := vfs.NewCrash(int64(round), vfs.CrashOptions{Garbage: true})
		s := crashStore(t, fsys)
		fsys.CrashAfter(1 + rng.IntN(40))
		s.EcImport(context.Background(), 7, "c", want, source)
		after := fsys.Crash()
		s2 := crashStore(t, after)
		if e2, ok := s2.EcVolume(7); ok && e2.Shards() != 0 {
			copied++
			checkEC(t, round, s2, files, want, 0)
		}
		// No shard file may be left half-written beside the volume.
		names, _ := after.ReadDir("/d")
		for _, n := range names {
			if _, i, ok := erasure.ParseShardName(n); ok {
				if e2, ok := s2.EcVolume(7); !ok || !e2.Shards().Has(i) {
					t.Fatalf("round %d: shard file %s left unmounted", round, filepath.Join("/d", n))
				}
			}
		}
		s2.Close()
	}
	t.Logf("%d of 25 crashes left the copied shards, the others none", copied)
}
