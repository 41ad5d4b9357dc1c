package volume

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/testutil"
	"github.com/kelpfs/kelp/internal/vfs"
)

// history is the sequence of states of one volume, one per completed append,
// so a test can say what a .dat cut at any offset must contain.
type history struct {
	ends   []int64                     // .dat size after append i
	states []map[uint64]expectedNeedle // content after append i
}

type expectedNeedle struct {
	cookie  uint32
	data    []byte // nil when deleted
	deleted bool
}

func (h *history) record(v *Volume, cur map[uint64]expectedNeedle) {
	snap := make(map[uint64]expectedNeedle, len(cur))
	for k, e := range cur {
		snap[k] = e
	}
	h.ends = append(h.ends, v.Stats().Size)
	h.states = append(h.states, snap)
}

// at returns the expected content of a .dat cut at size.
func (h *history) at(size int64) map[uint64]expectedNeedle {
	state := map[uint64]expectedNeedle{}
	for i, end := range h.ends {
		if end <= size {
			state = h.states[i]
		}
	}
	out := make(map[uint64]expectedNeedle, len(state))
	for k, e := range state {
		out[k] = e
	}
	return out
}

func verifyState(t *testing.T, v *Volume, want map[uint64]expectedNeedle, context string) {
	t.Helper()
	for k, e := range want {
		got, err := get(v, k, e.cookie)
		switch {
		case e.deleted && err == nil:
			t.Fatalf("%s: deleted key %x readable", context, k)
		case !e.deleted && err != nil:
			t.Fatalf("%s: key %x: %v", context, k, err)
		case !e.deleted && !bytes.Equal(got, e.data):
			t.Fatalf("%s: key %x has wrong data", context, k)
		}
	}
	if st := v.Stats(); st.FileCount != int64(countLive(want)) {
		t.Fatalf("%s: FileCount %d, want %d", context, st.FileCount, countLive(want))
	}
}

func countLive(m map[uint64]expectedNeedle) int {
	n := 0
	for _, e := range m {
		if !e.deleted {
			n++
		}
	}
	return n
}

// buildHistory writes, overwrites and deletes single-threaded, checkpointing
// half way so recovery exercises both the trusted index and the re-scan.
func buildHistory(t *testing.T, v *Volume, rng *rand.Rand, ops int) *history {
	h := &history{}
	cur := map[uint64]expectedNeedle{}
	h.record(v, cur)
	next := uint64(1)
	for i := 0; i < ops; i++ {
		if i == ops/2 {
			if err := v.checkpoint(); err != nil {
				t.Fatal(err)
			}
		}
		r := rng.Intn(10)
		switch {
		case r < 2 && len(cur) > 0: // delete
			k := uint64(1 + rng.Intn(int(next-1)))
			if e, ok := cur[k]; ok && !e.deleted {
				if _, err := v.Delete(context.Background(), k, e.cookie); err != nil {
					t.Fatal(err)
				}
				cur[k] = expectedNeedle{cookie: e.cookie, deleted: true}
				h.record(v, cur)
			}
		case r < 4 && len(cur) > 0: // overwrite
			k := uint64(1 + rng.Intn(int(next-1)))
			if e, ok := cur[k]; ok && !e.deleted {
				d := payload(k, i, 1+rng.Intn(5000))
				put(t, v, k, e.cookie, d)
				cur[k] = expectedNeedle{cookie: e.cookie, data: d}
				h.record(v, cur)
			}
		default:
			size := 1 + rng.Intn(5000)
			if rng.Intn(40) == 0 {
				size = bufferedRecord + rng.Intn(1<<20) // a streamed needle
			}
			k, c := next, rng.Uint32()
			next++
			d := payload(k, i, size)
			put(t, v, k, c, d)
			cur[k] = expectedNeedle{cookie: c, data: d}
			h.record(v, cur)
		}
	}
	return h
}

func truncateFile(t *testing.T, fsys vfs.FS, name string, size int64) {
	f, err := fsys.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func TestRecoverFromTruncationAtRandomOffsets(t *testing.T) {
	rng := rand.New(rand.NewSource(42))
	base := vfs.NewMem()
	cfg := testConfig(base)
	v := create(t, cfg)
	h := buildHistory(t, v, rng, 300)
	killed := base.Crash() // kill -9: no Close, index partly unflushed
	total := h.ends[len(h.ends)-1]
	trials := 60
	if testing.Short() || raceOn {
		trials = 15
	}
	for i := 0; i < trials; i++ {
		fsys := killed.Snapshot()
		cut := needle.SuperblockSize + rng.Int63n(total-needle.SuperblockSize+1)
		if i == 0 {
			cut = total
		}
		truncateFile(t, fsys, "/data/pics_7.dat", cut)
		c := cfg
		c.FS = fsys
		v := open(t, c)
		verifyState(t, v, h.at(cut), fmt.Sprintf("cut at %d", cut))
		// The volume stays usable and a second open agrees.
		put(t, v, 1<<40, 1, []byte("after"))
		v.Close()
		v = open(t, c)
		want := h.at(cut)
		want[1<<40] = expectedNeedle{cookie: 1, data: []byte("after")}
		verifyState(t, v, want, fmt.Sprintf("reopen after cut at %d", cut))
		v.Close()
	}
}

func TestRecoverFromDamagedIndex(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	base := vfs.NewMem()
	cfg := testConfig(base)
	v := create(t, cfg)
	h := buildHistory(t, v, rng, 200)
	v.Close()
	want := h.at(h.ends[len(h.ends)-1])
	damage := map[string]func(fsys *vfs.MemFS){
		"missing idx":        func(fsys *vfs.MemFS) { fsys.Remove("/data/pics_7.idx") },
		"missing checkpoint": func(fsys *vfs.MemFS) { fsys.Remove("/data/pics_7.ckp") },
		"idx behind": func(fsys *vfs.MemFS) {
			st, _ := fsys.Stat("/data/pics_7.idx")
			truncateFile(t, fsys, "/data/pics_7.idx", st.Size()/2)
		},
		"idx ahead with garbage": func(fsys *vfs.MemFS) {
			f, _ := fsys.OpenFile("/data/pics_7.idx", os.O_RDWR|os.O_APPEND, 0)
			f.Write(needle.AppendIndex(nil, needle.IndexEntry{Key: 5, Offset: 1 << 30, Size: 100}))
			f.Close()
		},
		"idx entry flipped": func(fsys *vfs.MemFS) {
			f, _ := fsys.OpenFile("/data/pics_7.idx", os.O_RDWR, 0)
			f.WriteAt([]byte{0xff}, 20)
			f.Close()
		},
		"checkpoint garbage": func(fsys *vfs.MemFS) {
			vfs.WriteFileAtomic(fsys, "/data/pics_7.ckp", []byte("garbage"), 0o644)
		},
	}
	for name, fn := range damage {
		t.Run(name, func(t *testing.T) {
			fsys := base.Snapshot()
			fn(fsys)
			c := cfg
			c.FS = fsys
			v := open(t, c)
			defer v.Close()
			verifyState(t, v, want, name)
		})
	}
}

// TestPowerLossUnderConcurrentLoad crashes the crash-simulating FS at many
// points while several writers create, overwrite (with identical and with
// different bytes), delete and re-create needles, some operations raced by
// their own retry, and checks after recovery that every acknowledged
// operation survived and every key is in its last acknowledged state or in
// the one its in-flight operation was heading for. Unsynced data is lost
// page by page, in the middle of the .dat as well as at its end. Any error
// other than the simulated crash fails the test.
func TestPowerLossUnderConcurrentLoad(t *testing.T) {
	seeds := 40
	if testing.Short() || raceOn {
		seeds = 12
	}
	for seed := int64(0); seed < int64(seeds); seed++ {
		powerLoss := seed%4 != 3 // every fourth run is a kill -9
		var fsys *vfs.MemFS
		if powerLoss {
			fsys = vfs.NewCrash(seed, vfs.CrashOptions{Garbage: seed%2 == 0})
		} else {
			fsys = vfs.NewMem()
		}
		cfg := testConfig(fsys)
		cfg.Fsync = true
		cfg.CheckpointInterval = 2e6 // 2ms: checkpoints race with the crash too
		v := create(t, cfg)
		rng := rand.New(rand.NewSource(seed))
		fsys.CrashAfter(50 + rng.Intn(1500))
		const writers = 4
		logs := make([]map[uint64]*keyState, writers)
		var wg sync.WaitGroup
		for w := range writers {
			logs[w] = map[uint64]*keyState{}
			wg.Add(1)
			go func(rng *rand.Rand) {
				defer wg.Done()
				if err := runCrashWriter(v, rng, uint64(w), logs[w]); err != nil {
					t.Errorf("seed %d writer %d: %v", seed, w, err)
				}
			}(rand.New(rand.NewSource(rng.Int63())))
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		v.Close()
		c := cfg
		c.FS = fsys.Crash()
		c.CheckpointInterval = -1
		rv, err := Open(c)
		if err != nil {
			t.Fatalf("seed %d: open after crash: %v", seed, err)
		}
		got := map[uint64]*expectedNeedle{}
		for _, mine := range logs {
			for k, ks := range mine {
				e, ok := ks.recovered(rv, k)
				if !ok {
					inflight := "nothing"
					if ks.inflight != nil {
						inflight = ks.inflight.String()
					}
					t.Fatalf("seed %d (power loss %v): key %x: acknowledged %s, in flight %s; after recovery neither",
						seed, powerLoss, k, ks.acked, inflight)
				}
				got[k] = e
			}
		}
		// Recovery leaves a writable volume, and opening it again agrees.
		put(t, rv, 1<<62, 1, []byte("post-crash"))
		rv.Close()
		rv = open(t, c)
		for k, e := range got {
			if !stateIs(rv, k, e) {
				t.Fatalf("seed %d: key %x changed between two opens after the crash", seed, k)
			}
		}
		mustGet(t, rv, 1<<62, 1, []byte("post-crash"))
		rv.Close()
	}
}

// keyState is what one writer knows of one of its keys: the state of the
// last acknowledged operation (nil: none, the key is absent) and the one an
// unanswered operation was heading for when the crash came.
type keyState struct {
	acked, inflight *expectedNeedle
}

func (e *expectedNeedle) String() string {
	switch {
	case e == nil:
		return "absent"
	case e.deleted:
		return fmt.Sprintf("deleted (cookie %x)", e.cookie)
	}
	return fmt.Sprintf("%d bytes (cookie %x)", len(e.data), e.cookie)
}

// recovered returns which of the allowed states key k is in.
func (ks *keyState) recovered(v *Volume, k uint64) (*expectedNeedle, bool) {
	if stateIs(v, k, ks.acked) {
		return ks.acked, true
	}
	if ks.inflight != nil && stateIs(v, k, ks.inflight) {
		return ks.inflight, true
	}
	return nil, false
}

// stateIs reports whether key k is in state e, read with e's own cookie.
func stateIs(v *Volume, k uint64, e *expectedNeedle) bool {
	if e == nil {
		_, err := get(v, k, 0)
		return errors.Is(err, ErrNotFound)
	}
	data, err := get(v, k, e.cookie)
	if e.deleted {
		return errors.Is(err, ErrDeleted)
	}
	return err == nil && bytes.Equal(data, e.data)
}

// runCrashWriter runs random operations on keys of its own until the FS
// crashes. It returns nil after the crash, or the first other error.
func runCrashWriter(v *Volume, rng *rand.Rand, w uint64, mine map[uint64]*keyState) error {
	var keys []uint64
	for i := 0; ; i++ {
		k := w<<32 | uint64(len(keys)+1)
		ks := &keyState{}
		if len(keys) > 0 && rng.Intn(2) == 0 {
			k = keys[rng.Intn(len(keys))]
			ks = mine[k]
		}
		next, op := nextOp(v, rng, k, i, ks.acked)
		ks.inflight = &next
		if ks.acked == nil {
			mine[k] = ks
			keys = append(keys, k)
		}
		// Now and then the client retries while its first attempt is still
		// in flight: the answer it gets first counts.
		racers := 1 + rng.Intn(4)/3
		errs := make(chan error, racers)
		for range racers {
			go func() { errs <- op() }()
		}
		acked, crashed := false, false
		for range racers {
			switch err := <-errs; {
			case err == nil, racers > 1 && next.deleted && errors.Is(err, ErrDeleted):
				acked = true
			case errors.Is(err, vfs.ErrCrashed):
				crashed = true
			default:
				return fmt.Errorf("key %x: %s -> %s: %w", k, ks.acked, &next, err)
			}
		}
		if acked {
			ks.acked, ks.inflight = &next, nil
		}
		if crashed {
			return nil
		}
	}
}

// nextOp picks an operation on key k, whose acknowledged state is cur, and
// returns the state it leads to.
func nextOp(v *Volume, rng *rand.Rand, k uint64, gen int, cur *expectedNeedle) (expectedNeedle, func() error) {
	write := func(e expectedNeedle) (expectedNeedle, func() error) {
		return e, func() error {
			_, err := v.Write(context.Background(), needle.Meta{Key: k, Cookie: e.cookie}, bytes.NewReader(e.data), int64(len(e.data)))
			return err
		}
	}
	size := 1 + rng.Intn(3000)
	if rng.Intn(300) == 0 {
		size = bufferedRecord + rng.Intn(64<<10) // streamed
	}
	switch {
	case cur == nil || cur.deleted: // create, or re-create with a new cookie
		return write(expectedNeedle{cookie: rng.Uint32() | 1, data: payload(k, gen, size)})
	case rng.Intn(3) == 0:
		e := expectedNeedle{cookie: cur.cookie, deleted: true}
		return e, func() error { _, err := v.Delete(context.Background(), k, e.cookie); return err }
	case rng.Intn(2) == 0: // the same bytes again
		return write(*cur)
	default:
		return write(expectedNeedle{cookie: cur.cookie, data: payload(k, gen, size)})
	}
}

// stalledSync is a volume with Fsync on the crash-simulating FS (losing
// everything unsynced) whose .dat syncs, once stall is called, block until
// release is, so a test can act while a writer waits for its group fsync,
// then cut the power.
type stalledSync struct {
	mem     *vfs.MemFS
	ffs     *vfs.FaultFS
	v       *Volume
	release func()
}

func newStalledSync(t *testing.T) *stalledSync {
	t.Helper()
	mem := vfs.NewCrash(1, vfs.CrashOptions{DropUnsynced: true})
	ffs := vfs.NewFaulty(mem)
	cfg := testConfig(ffs)
	cfg.Fsync = true
	return &stalledSync{mem: mem, ffs: ffs, v: create(t, cfg)}
}

func (s *stalledSync) stall(t *testing.T) {
	gate := make(chan struct{})
	s.release = sync.OnceFunc(func() { close(gate) })
	t.Cleanup(s.release)
	s.ffs.Inject(vfs.Fault{Op: vfs.OpSync, Path: ".dat", Block: gate})
}

// answerOrWait runs op and returns its error if it answers before it joins
// the writers waiting for the stalled sync (then nil, false).
func (s *stalledSync) answerOrWait(t *testing.T, waiters int, op func() error) (err error, answered bool, late chan error) {
	t.Helper()
	late = make(chan error, 1)
	go func() { late <- op() }()
	testutil.WaitFor(t, 10*time.Second, func() bool {
		select {
		case err = <-late:
			answered = true
			return true
		default:
			return s.v.syncer.waiters() >= waiters
		}
	}, "the operation to answer or wait for the sync")
	return err, answered, late
}

// crash cuts the power while the sync is still stalled, then lets it finish
// (it fails: the FS is gone) and reopens what survived.
func (s *stalledSync) crash(t *testing.T, pending ...chan error) *Volume {
	t.Helper()
	after := s.mem.Crash()
	s.release()
	for _, ch := range pending {
		if err := <-ch; err == nil {
			t.Fatal("an operation waiting for the stalled sync succeeded after the crash")
		}
	}
	s.v.Close()
	cfg := testConfig(after)
	return open(t, cfg)
}

// TestRetriedIdenticalWriteWaitsForTheFirst: a client retries a PUT while
// its first attempt waits for the group fsync. The retry finds identical
// bytes stored and must not be acknowledged before they are durable
// (issue 8: it was answered Unchanged at once, and lost in a power cut).
// A streamed needle is never compared, so its retry appends a copy and
// waits for it; it is checked all the same.
func TestRetriedIdenticalWriteWaitsForTheFirst(t *testing.T) {
	for _, size := range []int{1000, smallRecord + 10, bufferedRecord + 10} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			s := newStalledSync(t)
			s.stall(t)
			data := payload(1, 0, size)
			write := func() error {
				_, err := s.v.Write(context.Background(), needle.Meta{Key: 1, Cookie: 7}, bytes.NewReader(data), int64(len(data)))
				return err
			}
			first := make(chan error, 1)
			go func() { first <- write() }()
			testutil.WaitFor(t, 10*time.Second, func() bool { return s.v.syncer.waiters() == 1 }, "the first write to wait for its sync")
			err, answered, retry := s.answerOrWait(t, 2, write)
			if answered && err != nil {
				t.Fatalf("retry: %v", err)
			}
			var pending []chan error
			if !answered {
				pending = append(pending, retry)
			}
			rv := s.crash(t, append(pending, first)...)
			defer rv.Close()
			if answered {
				if _, err := get(rv, 1, 7); err != nil {
					t.Fatalf("the retry was acknowledged before the needle was durable; after the power cut: %v", err)
				}
			}
		})
	}
}

// TestRetriedDeleteWaitsForTheFirst: a delete that finds the needle already
// deleted answers ErrDeleted, which callers take as success (the volume
// server's replicas and the filer's garbage collector do); it must not
// answer before the tombstone is durable.
func TestRetriedDeleteWaitsForTheFirst(t *testing.T) {
	s := newStalledSync(t)
	put(t, s.v, 1, 7, []byte("doomed")) // synced
	s.stall(t)

	del := func() error { _, err := s.v.Delete(context.Background(), 1, 7); return err }
	first := make(chan error, 1)
	go func() { first <- del() }()
	testutil.WaitFor(t, 10*time.Second, func() bool { return s.v.syncer.waiters() == 1 }, "the first delete to wait for its sync")
	err, answered, retry := s.answerOrWait(t, 2, del)
	if answered && !errors.Is(err, ErrDeleted) {
		t.Fatalf("retried delete: %v, want ErrDeleted", err)
	}
	var pending []chan error
	if !answered {
		pending = append(pending, retry)
	}
	rv := s.crash(t, append(pending, first)...)
	defer rv.Close()
	if _, err := get(rv, 1, 7); answered && err == nil {
		t.Fatal("the retried delete answered 'already deleted' before the tombstone was durable; the needle is back after the power cut")
	}
}

// TestUnchangedOverwriteAnswersAfterTheSync: without a crash the retry of
// TestRetriedIdenticalWriteWaitsForTheFirst succeeds, as Unchanged, once the
// first attempt's sync has finished.
func TestUnchangedOverwriteAnswersAfterTheSync(t *testing.T) {
	s := newStalledSync(t)
	s.stall(t)
	data := payload(1, 0, 1000)
	write := func() (WriteResult, error) {
		return s.v.Write(context.Background(), needle.Meta{Key: 1, Cookie: 7}, bytes.NewReader(data), int64(len(data)))
	}
	first := make(chan error, 1)
	go func() { _, err := write(); first <- err }()
	testutil.WaitFor(t, 10*time.Second, func() bool { return s.v.syncer.waiters() == 1 }, "the first write to wait for its sync")
	retry := make(chan WriteResult, 1)
	go func() {
		res, err := write()
		if err != nil {
			t.Errorf("retry: %v", err)
		}
		retry <- res
	}()
	testutil.WaitFor(t, 10*time.Second, func() bool { return s.v.syncer.waiters() == 2 }, "the retry to wait for the sync")
	s.release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if res := <-retry; !res.Unchanged {
		t.Fatalf("retry = %+v, want Unchanged", res)
	}
	s.v.Close()
}

// TestSyncFailureIsFinal: after a failed fsync, a later successful one (a
// checkpoint's, or Close's) must not acknowledge the writes the failed one
// covered: Linux may have dropped their pages and still report the second
// fsync as a success.
func TestSyncFailureIsFinal(t *testing.T) {
	var s syncer
	s.init()
	s.done(3, errors.New("EIO"))
	s.done(5, nil)
	if err := s.wait(3); !errors.Is(err, ErrBroken) {
		t.Fatalf("wait after a failed fsync = %v, want ErrBroken", err)
	}
}

// TestNoCheckpointAfterFailedSync: once an fsync of the .dat failed, a
// checkpoint (the periodic one, or Close's) must not vouch for the .dat up
// to its tail: the second fsync it runs may succeed on Linux although the
// pages the first could not write are gone, and Open would then trust index
// entries for records that are not on disk instead of re-scanning them.
func TestNoCheckpointAfterFailedSync(t *testing.T) {
	ffs := vfs.NewFaulty(vfs.NewMem())
	cfg := testConfig(ffs)
	cfg.Fsync = true
	v := create(t, cfg)
	put(t, v, 1, 1, []byte("synced"))
	good := v.Stats().Size
	ffs.Inject(vfs.Fault{Op: vfs.OpSync, Path: ".dat", Err: syscall.EIO, Times: 1})
	_, err := v.Write(context.Background(), needle.Meta{Key: 2, Cookie: 2}, bytes.NewReader([]byte("lost")), 4)
	mustErr(t, err, ErrBroken)
	v.Close()
	b, err := vfs.ReadFile(ffs, "/data/pics_7.ckp")
	if err != nil {
		t.Fatal(err)
	}
	ck, err := parseCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	if ck.datEnd > good {
		t.Fatalf("checkpoint after the failed fsync vouches for the .dat up to %d; only %d was synced", ck.datEnd, good)
	}
}

// TestRecoverFromHoleBeforeIntactRecords: a power cut can lose an unsynced
// page and keep later ones, leaving zeros in the middle of the .dat with
// intact records after them. Those records were appended after the hole,
// so never acknowledged: recovery cuts at the hole, keeps everything before
// it and leaves a volume that writes and reopens consistently.
func TestRecoverFromHoleBeforeIntactRecords(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig(mem)
	v := create(t, cfg)
	put(t, v, 1, 1, payload(1, 0, 5000))
	if err := v.checkpoint(); err != nil {
		t.Fatal(err)
	}
	hole := v.Stats().Size
	for k := uint64(2); k <= 4; k++ {
		put(t, v, k, 1, payload(k, 0, 5000))
	}
	killed := mem.Crash()
	f, err := killed.OpenFile("/data/pics_7.dat", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 4096), hole+100); err != nil { // inside record 2
		t.Fatal(err)
	}
	f.Close()
	c := cfg
	c.FS = killed
	rv := open(t, c)
	want := map[uint64]expectedNeedle{1: {cookie: 1, data: payload(1, 0, 5000)}}
	verifyState(t, rv, want, "after the hole")
	for k := uint64(2); k <= 4; k++ {
		if _, err := get(rv, k, 1); !errors.Is(err, ErrNotFound) {
			t.Fatalf("key %d, after the hole: %v, want ErrNotFound", k, err)
		}
	}
	if got := rv.Stats().Size; got != hole {
		t.Fatalf("the .dat was cut at %d, want %d (the hole)", got, hole)
	}
	put(t, rv, 5, 1, []byte("after"))
	rv.Close()
	rv = open(t, c)
	defer rv.Close()
	want[5] = expectedNeedle{cookie: 1, data: []byte("after")}
	verifyState(t, rv, want, "reopened")
}
