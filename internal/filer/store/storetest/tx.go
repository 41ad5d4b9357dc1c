package storetest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kelpfs/kelp/internal/filer/store"
)

func testTxReadsOwnWrites(t *testing.T, b Backend) {
	s := b.Fresh(t)(t)
	for _, k := range []string{"a", "c", "e", "g"} {
		put(t, s, []byte(k), []byte("old-"+k))
	}
	err := s.Update(context.Background(), func(tx store.Tx) error {
		for _, op := range []struct{ k, v string }{{"b", "new-b"}, {"c", "new-c"}, {"e", ""}, {"h", "new-h"}} {
			var err error
			if op.v == "" {
				err = tx.Delete([]byte(op.k))
			} else {
				err = tx.Put([]byte(op.k), []byte(op.v))
			}
			if err != nil {
				return err
			}
		}
		if v, err := tx.Get([]byte("c")); err != nil || string(v) != "new-c" {
			return fmt.Errorf("tx.Get of own overwrite = %q, %v", v, err)
		}
		if _, err := tx.Get([]byte("e")); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("tx.Get of own delete: %v, want ErrNotFound", err)
		}
		cases := []struct {
			start, end string
			limit      int
			want       string
		}{
			{"", "", 0, "a=old-a b=new-b c=new-c g=old-g h=new-h"},
			{"", "", 3, "a=old-a b=new-b c=new-c"},
			{"b", "h", 0, "b=new-b c=new-c g=old-g"},
			{"c", "", 2, "c=new-c g=old-g"},
			{"d", "g", 0, ""},
		}
		for _, c := range cases {
			start, end := []byte(c.start), []byte(c.end)
			if c.end == "" {
				end = nil
			}
			got, err := txScanAll(tx, start, end, c.limit)
			if err != nil {
				return err
			}
			var parts []string
			for _, p := range got {
				parts = append(parts, p.k+"="+p.v)
			}
			if s := strings.Join(parts, " "); s != c.want {
				return fmt.Errorf("tx.Scan [%q,%q) limit %d = %q, want %q", c.start, c.end, c.limit, s, c.want)
			}
		}
		// A key put then deleted in one transaction is gone.
		if err := tx.Put([]byte("z"), []byte("tmp")); err != nil {
			return err
		}
		return tx.Delete([]byte("z"))
	})
	if err != nil {
		t.Fatal(err)
	}
	got := scanAll(t, s, nil, nil, 0)
	want := []pair{{"a", "old-a"}, {"b", "new-b"}, {"c", "new-c"}, {"g", "old-g"}, {"h", "new-h"}}
	if !samePairs(got, want) {
		t.Fatalf("after commit: %q, want %q", got, want)
	}
}

func testTxAbort(t *testing.T, b Backend) {
	s := b.Fresh(t)(t)
	put(t, s, []byte("keep"), []byte("1"))
	boom := errors.New("boom")
	err := s.Update(context.Background(), func(tx store.Tx) error {
		for i := 0; i < 50; i++ {
			if err := tx.Put([]byte(fmt.Sprintf("new/%02d", i)), []byte("x")); err != nil {
				return err
			}
		}
		if err := tx.Delete([]byte("keep")); err != nil {
			return err
		}
		return fmt.Errorf("wrapped: %w", boom)
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update returned %v, want the function's error", err)
	}
	got := scanAll(t, s, nil, nil, 0)
	if !samePairs(got, []pair{{"keep", "1"}}) {
		t.Fatalf("aborted transaction left %d pairs: %q", len(got), got)
	}
}

func testTxDone(t *testing.T, b Backend) {
	s := b.Fresh(t)(t)
	var leaked store.Tx
	if err := s.Update(context.Background(), func(tx store.Tx) error { leaked = tx; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := leaked.Put([]byte("k"), []byte("v")); !errors.Is(err, store.ErrTxDone) {
		t.Fatalf("Put after the transaction: %v, want ErrTxDone", err)
	}
	if _, err := leaked.Get([]byte("k")); !errors.Is(err, store.ErrTxDone) {
		t.Fatalf("Get after the transaction: %v, want ErrTxDone", err)
	}
	wantMissing(t, s, []byte("k"))
	var leakedR store.ReadTx
	if err := s.View(context.Background(), func(tx store.ReadTx) error { leakedR = tx; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := leakedR.Scan(nil, nil, 0, func(k, v []byte) error { return nil }); !errors.Is(err, store.ErrTxDone) {
		t.Fatalf("Scan after the view: %v, want ErrTxDone", err)
	}
}

// instances returns the stores the concurrency cases spread their workers
// over: one, or two on the same namespace for a shared backend.
func instances(t *testing.T, b Backend) []store.Store {
	open := b.Fresh(t)
	ss := []store.Store{open(t)}
	if b.Shared {
		ss = append(ss, open(t))
	}
	return ss
}

func workload(short, long int) int {
	if testing.Short() {
		return short
	}
	return long
}

// testConcurrentIncrements: read-modify-write of one counter from many
// goroutines (over two instances when shared) must lose no update.
func testConcurrentIncrements(t *testing.T, b Backend) {
	ss := instances(t, b)
	workers, each := 8, workload(10, 25)
	key := []byte("counter")
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(s store.Store) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				err := s.Update(context.Background(), func(tx store.Tx) error {
					var n uint64
					v, err := tx.Get(key)
					if err == nil {
						n = binary.BigEndian.Uint64(v)
					} else if !errors.Is(err, store.ErrNotFound) {
						return err
					}
					return tx.Put(key, binary.BigEndian.AppendUint64(nil, n+1))
				})
				if err != nil {
					t.Errorf("increment: %v", err)
					return
				}
			}
		}(ss[w%len(ss)])
	}
	wg.Wait()
	for _, s := range ss {
		if got := binary.BigEndian.Uint64(mustGet(t, s, key)); got != uint64(workers*each) {
			t.Fatalf("counter = %d after %d increments: updates were lost", got, workers*each)
		}
	}
}

// testNoPartialReads moves a directory tree of n keys between two prefixes
// in single transactions while readers (on the other instance when shared)
// check that they always see exactly one whole copy.
func testNoPartialReads(t *testing.T, b Backend) {
	ss := instances(t, b)
	writer, reader := ss[0], ss[len(ss)-1]
	const n = 20
	renames := workload(10, 30)
	name := func(dir byte, i int) []byte { return []byte(fmt.Sprintf("tree/%c/%02d", dir, i)) }
	err := writer.Update(context.Background(), func(tx store.Tx) error {
		for i := 0; i < n; i++ {
			if err := tx.Put(name('a', i), []byte("gen0")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	check := func(tx store.ReadTx) error {
		got, err := txScanAll(tx, []byte("tree/"), store.PrefixEnd([]byte("tree/")), 0)
		if err != nil {
			return err
		}
		if len(got) != n {
			return fmt.Errorf("saw %d keys of the tree, want %d", len(got), n)
		}
		dir, gen := got[0].k[5], got[0].v
		for _, p := range got {
			if p.k[5] != dir || p.v != gen {
				return fmt.Errorf("saw a half-moved tree: %q=%q next to %q=%q", got[0].k, gen, p.k, p.v)
			}
		}
		_, errA := tx.Get(name('a', n-1))
		_, errB := tx.Get(name('b', n-1))
		if (errA == nil) == (errB == nil) {
			return fmt.Errorf("last entry under a: %v, under b: %v; want exactly one", errA, errB)
		}
		return nil
	}
	done := make(chan struct{})
	var wg, started sync.WaitGroup
	for r := 0; r < 2; r++ {
		wg.Add(1)
		started.Add(1)
		go func(r int) {
			defer wg.Done()
			for reads := 0; ; reads++ {
				if reads == 1 {
					started.Done()
				}
				select {
				case <-done:
					return
				default:
				}
				var err error
				if r == 0 {
					err = reader.View(context.Background(), check)
				} else { // a read-only Update must be as consistent
					err = reader.Update(context.Background(), func(tx store.Tx) error { return check(tx) })
				}
				if err != nil {
					t.Errorf("reader %d: %v", r, err)
					if reads == 0 {
						started.Done()
					}
					return
				}
			}
		}(r)
	}
	started.Wait() // so that the renames race with reads
	for g := 1; g <= renames; g++ {
		from, to := byte('a'), byte('b')
		if g%2 == 0 {
			from, to = to, from
		}
		err := writer.Update(context.Background(), func(tx store.Tx) error {
			for i := 0; i < n; i++ {
				if err := tx.Delete(name(from, i)); err != nil {
					return err
				}
				if err := tx.Put(name(to, i), []byte(fmt.Sprint("gen", g))); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Errorf("rename %d: %v", g, err)
			break
		}
	}
	close(done)
	wg.Wait()
}

// testSequence appends event-log records with store.NextSeq from many
// goroutines (two instances when shared): the numbers must be 1..N, each
// once, and the records must scan back in that order.
func testSequence(t *testing.T, b Backend) {
	ss := instances(t, b)
	seqKey, logPrefix := []byte("seq/log"), []byte("log/")
	workers, each := 6, workload(5, 15)
	var (
		mu  sync.Mutex
		got []uint64
		wg  sync.WaitGroup
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int, s store.Store) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				var seq uint64
				err := s.Update(context.Background(), func(tx store.Tx) error {
					var err error
					if seq, err = store.NextSeq(tx, seqKey); err != nil {
						return err
					}
					return tx.Put(store.SeqKey(logPrefix, seq), []byte(fmt.Sprintf("w%d-%d", w, i)))
				})
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
				mu.Lock()
				got = append(got, seq)
				mu.Unlock()
			}
		}(w, ss[w%len(ss)])
	}
	wg.Wait()
	total := workers * each
	slices.Sort(got)
	for i, seq := range got {
		if seq != uint64(i+1) {
			t.Fatalf("sequence numbers %v: want 1..%d, each once", got, total)
		}
	}
	records := scanAll(t, ss[0], logPrefix, store.PrefixEnd(logPrefix), 0)
	if len(records) != total {
		t.Fatalf("%d log records, want %d", len(records), total)
	}
	for i, r := range records {
		if seq, err := store.SeqOf([]byte(r.k)); err != nil || seq != uint64(i+1) {
			t.Fatalf("record %d has sequence %d (%v), want %d", i, seq, err, i+1)
		}
	}
}

// testRetry: another instance commits a write to a key between the
// transaction's read of it and its commit. The transaction must not commit
// its stale read-modify-write: it must run fn again and build on the
// other write.
func testRetry(t *testing.T, b Backend) {
	if !b.Shared {
		t.Skip("needs two instances on one namespace")
	}
	ss := instances(t, b)
	key := []byte("contended")
	put(t, ss[0], key, []byte("1"))
	calls := 0
	err := ss[0].Update(context.Background(), func(tx store.Tx) error {
		calls++
		v, err := tx.Get(key)
		if err != nil {
			return err
		}
		if calls == 1 { // interfere once, after the read
			put(t, ss[1], key, []byte("10"))
		}
		return tx.Put(key, append(v, '0'))
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(mustGet(t, ss[1], key)); got != "100" || calls < 2 {
		t.Fatalf("after an interfering write: value %q after %d runs of fn, want 100 after 2 or more", got, calls)
	}
}
