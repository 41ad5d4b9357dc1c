package volume

import (
	"bytes"
	"context"
	"io"
	"math/rand"
	"sync"
	"testing"

	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/vfs"
)

func TestVacuumWhileWritingAndReading(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := testConfig(fsys)
	cfg.Fsync = true
	v := create(t, cfg)
	rng := rand.New(rand.NewSource(1))
	h := buildHistory(t, v, rng, 400)
	want := h.at(h.ends[len(h.ends)-1])
	big := payload(1<<50, 0, 3<<20)
	put(t, v, 1<<50, 5, big)
	want[1<<50] = expectedNeedle{cookie: 5, data: big}
	before := v.Stats()
	if before.GarbageRatio <= 0 {
		t.Fatalf("no garbage to vacuum: %+v", before)
	}
	// A reader holding an object across the switch keeps working.
	held, err := v.Read(1<<50, 5)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := uint64(1)<<48 | uint64(w)<<32 | uint64(i)
				d := payload(k, i, 100+i%3000)
				if _, err := v.Write(context.Background(), needle.Meta{Key: k, Cookie: 9}, bytes.NewReader(d), int64(len(d))); err != nil {
					t.Errorf("write during vacuum: %v", err)
					return
				}
				mu.Lock()
				want[k] = expectedNeedle{cookie: 9, data: d}
				mu.Unlock()
				if i%5 == 4 { // delete one written earlier in this loop
					dk := k - 2
					if _, err := v.Delete(context.Background(), dk, 9); err != nil {
						t.Errorf("delete during vacuum: %v", err)
						return
					}
					mu.Lock()
					want[dk] = expectedNeedle{cookie: 9, deleted: true}
					mu.Unlock()
				}
			}
		}(w)
	}
	for i := 0; i < 2; i++ {
		if err := v.Vacuum(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	got, err := io.ReadAll(held)
	held.Close()
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("object held across vacuum: %v", err)
	}
	after := v.Stats()
	if after.CompactionRevision != before.CompactionRevision+2 {
		t.Fatalf("revision %d -> %d", before.CompactionRevision, after.CompactionRevision)
	}
	verifyState(t, v, want, "after vacuum")
	v.Close()
	v = open(t, cfg)
	defer v.Close()
	verifyState(t, v, want, "reopened after vacuum")
	if st := v.Stats(); st.CompactionRevision != after.CompactionRevision || st.Size != after.Size {
		t.Fatalf("reopened stats %+v, want %+v", st, after)
	}
}

func TestVacuumReclaimsGarbage(t *testing.T) {
	v := create(t, testConfig(vfs.NewMem()))
	defer v.Close()
	for k := uint64(1); k <= 100; k++ {
		put(t, v, k, 1, payload(k, 0, 1000))
	}
	for k := uint64(1); k <= 100; k += 2 {
		if _, err := v.Delete(context.Background(), k, 1); err != nil {
			t.Fatal(err)
		}
	}
	before := v.Stats()
	if before.GarbageRatio < 0.45 || before.FileCount != 50 {
		t.Fatalf("before: %+v", before)
	}
	if err := v.Vacuum(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := v.Stats()
	if after.GarbageRatio != 0 || after.FileCount != 50 || after.Size >= before.Size*6/10 || after.DeleteCount != 0 {
		t.Fatalf("after: %+v (before %+v)", after, before)
	}
	for k := uint64(2); k <= 100; k += 2 {
		mustGet(t, v, k, 1, payload(k, 0, 1000))
	}
	_, err := get(v, 1, 1)
	mustErr(t, err, ErrNotFound)
}

func TestVacuumErrorsLeaveVolumeIntact(t *testing.T) {
	fsys := vfs.NewFaulty(vfs.NewMem())
	v := create(t, testConfig(fsys))
	defer v.Close()
	for k := uint64(1); k <= 30; k++ {
		put(t, v, k, 1, payload(k, 0, 500))
		if k%3 == 0 {
			v.Delete(context.Background(), k, 1)
		}
	}
	for _, f := range []vfs.Fault{{Op: vfs.OpWrite, Skip: 2}, {Op: vfs.OpSync, Skip: 1}, {Op: vfs.OpRename}, {Op: vfs.OpOpen}} {
		f.Path, f.Times = ".cp", 1
		op := f.Op
		fsys.Inject(f)
		if err := v.Vacuum(context.Background()); err == nil {
			t.Fatalf("vacuum with failing %s succeeded", op)
		}
		fsys.Clear()
		for k := uint64(1); k <= 30; k++ {
			if k%3 != 0 {
				mustGet(t, v, k, 1, payload(k, 0, 500))
			}
		}
	}
	if err := v.Vacuum(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v.Stats().CompactionRevision != 1 {
		t.Fatalf("revision %d", v.Stats().CompactionRevision)
	}
}

// TestVacuumCrashAtEveryPoint crashes (power loss) at each mutating
// operation of a vacuum that runs alongside writes, and checks that the
// recovered volume holds every acknowledged needle.
func TestVacuumCrashAtEveryPoint(t *testing.T) {
	base := vfs.NewCrash(5, vfs.CrashOptions{Garbage: true})
	cfg := testConfig(base)
	cfg.Fsync = true
	v := create(t, cfg)
	h := buildHistory(t, v, rand.New(rand.NewSource(3)), 60)
	v.Close()
	want := h.at(h.ends[len(h.ends)-1])
	step := 1
	if testing.Short() {
		step = 4
	}
	for n := 1; ; n += step {
		fsys := base.Snapshot()
		c := cfg
		c.FS = fsys
		v := open(t, c)
		fsys.CrashAfter(n)
		acked := map[uint64]expectedNeedle{}
		done := make(chan struct{})
		go func() { // writes racing with the vacuum
			defer close(done)
			for i := 0; i < 20; i++ {
				k := uint64(1)<<40 | uint64(i)
				d := payload(k, i, 200)
				if _, err := v.Write(context.Background(), needle.Meta{Key: k, Cookie: 1}, bytes.NewReader(d), int64(len(d))); err != nil {
					return
				}
				acked[k] = expectedNeedle{cookie: 1, data: d}
			}
		}()
		verr := v.Vacuum(context.Background())
		<-done
		crashed := fsys.Crashed()
		v.Close()
		if !crashed && verr != nil {
			t.Fatalf("crash point %d: vacuum failed without a crash: %v", n, verr)
		}
		c.FS = fsys.Crash()
		rv, err := Open(c)
		if err != nil {
			t.Fatalf("crash point %d: open: %v", n, err)
		}
		all := map[uint64]expectedNeedle{}
		for k, e := range want {
			all[k] = e
		}
		for k, e := range acked {
			all[k] = e
		}
		for k, e := range all {
			got, err := get(rv, k, e.cookie)
			if e.deleted {
				if err == nil {
					t.Fatalf("crash point %d: deleted %x came back", n, k)
				}
				continue
			}
			if err != nil || !bytes.Equal(got, e.data) {
				t.Fatalf("crash point %d: key %x: %v", n, k, err)
			}
		}
		rv.Close()
		if !crashed {
			if n < 10 {
				t.Fatalf("vacuum finished within %d operations; the test did not exercise it", n)
			}
			return
		}
	}
}
