package pebble

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kelpfs/kelp/internal/filer/store"
	"github.com/kelpfs/kelp/internal/filer/store/pebble/pebbletest"
	"github.com/kelpfs/kelp/internal/testutil"
)

// TestNoOpUpdateWaitsForWhatItRead: a transaction that finds its work
// already done (a retried create, say) writes nothing, but its success
// promises what it read; if that is a concurrent commit still waiting for
// its WAL fsync, the answer must wait too, or a power cut loses a change
// that was acknowledged.
func TestNoOpUpdateWaitsForWhatItRead(t *testing.T) {
	mem := vfs.NewCrashableMem()
	fsys := pebbletest.NewStallFS(mem)
	s, err := Open("/db", &Options{FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	release := fsys.Stall()
	defer release()

	ctx := context.Background()
	key := []byte("/dir/file")
	create := func(tx store.Tx) error {
		if _, err := tx.Get(key); !errors.Is(err, store.ErrNotFound) {
			return err // exists already (or failed): nothing to do
		}
		return tx.Put(key, []byte("entry"))
	}
	first := make(chan error, 1)
	go func() { first <- s.Update(ctx, create) }()
	testutil.WaitFor(t, 10*time.Second, func() bool {
		_, err := s.Get(ctx, key)
		return err == nil && fsys.Stalled() > 0
	}, "the first commit to be visible, waiting for its WAL sync")

	retry := make(chan error, 1)
	go func() { retry <- s.Update(ctx, create) }()
	answered := false
	testutil.WaitFor(t, 10*time.Second, func() bool {
		select {
		case err := <-retry:
			if err != nil {
				t.Fatalf("retry: %v", err)
			}
			answered = true
			return true
		default:
			return s.syncWaits.Load() > 0
		}
	}, "the retry to answer or wait")
	if !answered {
		select {
		case err := <-retry:
			t.Fatalf("the retry answered (%v) while the sync it waits for is stalled", err)
		default:
		}
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	release() // the original file system lives on: both finish
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if !answered {
		if err := <-retry; err != nil {
			t.Fatalf("retry after the sync: %v", err)
		}
	}
	s.Close()
	if !answered {
		return
	}
	after := reopen(t, crashed)
	if _, err := after.Get(ctx, key); err != nil {
		t.Fatalf("the retry was acknowledged before the entry it saw was durable; after the power cut: %v", err)
	}
}

// TestDeferredUpdateAnswersBeforeSyncAndSyncWaitsForIt: an Update under
// WithDeferredDurability answers while its WAL sync is stalled (visible at
// once); an empty Update (the filer's Sync) waits until that sync is done,
// and what it vouched for survives a power cut.
func TestDeferredUpdateAnswersBeforeSyncAndSyncWaitsForIt(t *testing.T) {
	mem := vfs.NewCrashableMem()
	fsys := pebbletest.NewStallFS(mem)
	s, err := Open("/db", &Options{FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	release := fsys.Stall()
	defer release()

	ctx := context.Background()
	key := []byte("/dir/file")
	if err := s.Update(store.WithDeferredDurability(ctx), func(tx store.Tx) error {
		return tx.Put(key, []byte("entry"))
	}); err != nil {
		t.Fatalf("deferred update: %v", err)
	}
	if _, err := s.Get(ctx, key); err != nil {
		t.Fatalf("deferred commit not visible: %v", err)
	}
	synced := make(chan error, 1)
	go func() { synced <- s.Update(ctx, func(store.Tx) error { return nil }) }()
	testutil.WaitFor(t, 10*time.Second, func() bool { return s.syncWaits.Load() > 0 },
		"the empty Update to wait for the deferred commit's sync")
	select {
	case err := <-synced:
		t.Fatalf("Sync answered (%v) while the deferred commit's WAL sync is stalled", err)
	default:
	}
	release()
	if err := <-synced; err != nil {
		t.Fatalf("sync: %v", err)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	after := reopen(t, crashed)
	if _, err := after.Get(ctx, key); err != nil {
		t.Fatalf("deferred commit lost after Sync and a power cut: %v", err)
	}
}

// TestDeferredUpdatesShareOneLazySync: deferred Updates sync nothing of
// their own; an unhurried empty Update (the event stream's) waits for their
// shared sync without forcing one; a plain empty Update (the filer's Sync)
// forces one; Close runs the armed round at once; and everything survives
// a power cut after Close.
func TestDeferredUpdatesShareOneLazySync(t *testing.T) {
	mem := vfs.NewCrashableMem()
	fsys := pebbletest.NewStallFS(mem)
	s, err := Open("/db", &Options{FS: fsys, DeferredSyncDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	release := fsys.Stall()
	defer release()

	ctx := context.Background()
	deferred := store.WithDeferredDurability(ctx)
	const n = 20
	for i := range n {
		if err := s.Update(deferred, func(tx store.Tx) error {
			return tx.Put([]byte(fmt.Sprintf("/d/f%02d", i)), []byte("entry"))
		}); err != nil {
			t.Fatalf("deferred update %d: %v", i, err)
		}
	}
	if got := fsys.Stalled(); got != 0 {
		t.Fatalf("%d WAL syncs started by deferred updates, want none until the round's timer", got)
	}

	unhurried := make(chan error, 1)
	go func() {
		unhurried <- s.Update(store.WithUnhurriedDurability(ctx), func(store.Tx) error { return nil })
	}()
	testutil.WaitFor(t, 10*time.Second, func() bool { return s.syncWaits.Load() > 0 },
		"the unhurried empty Update to wait")
	if got := fsys.Stalled(); got != 0 {
		t.Fatalf("the unhurried empty Update started %d WAL syncs, want none", got)
	}

	forced := make(chan error, 1)
	go func() { forced <- s.Update(ctx, func(store.Tx) error { return nil }) }()
	testutil.WaitFor(t, 10*time.Second, func() bool { return fsys.Stalled() > 0 },
		"the plain empty Update to force a WAL sync")
	release()
	if err := <-forced; err != nil {
		t.Fatalf("forced sync: %v", err)
	}
	select {
	case err := <-unhurried:
		t.Fatalf("the unhurried Update answered (%v) before the deferred round's sync", err)
	default:
	}

	if err := s.Close(); err != nil { // fires the armed round now, not in an hour
		t.Fatal(err)
	}
	if err := <-unhurried; err != nil {
		t.Fatalf("unhurried: %v", err)
	}
	if got := s.lazy.rounds; got != 1 {
		t.Fatalf("%d lazy rounds for %d deferred updates, want 1", got, n)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	after := reopen(t, crashed)
	for i := range n {
		if _, err := after.Get(ctx, []byte(fmt.Sprintf("/d/f%02d", i))); err != nil {
			t.Fatalf("deferred update %d lost after Close and a power cut: %v", i, err)
		}
	}
}

// TestLazySyncMakesDeferredUpdatesDurable: with nobody forcing a sync, the
// round's timer does, and an unhurried empty Update returns after it with
// the deferred commit durable.
func TestLazySyncMakesDeferredUpdatesDurable(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s, err := Open("/db", &Options{FS: mem, DeferredSyncDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	key := []byte("/d/f")
	if err := s.Update(store.WithDeferredDurability(ctx), func(tx store.Tx) error {
		return tx.Put(key, []byte("entry"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(store.WithUnhurriedDurability(ctx), func(store.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	after := reopen(t, crashed)
	if _, err := after.Get(ctx, key); err != nil {
		t.Fatalf("deferred commit lost after its lazy sync and a power cut: %v", err)
	}
}

// reopen opens the database left in fsys (a crash clone), closed at the
// test's end.
func reopen(t *testing.T, fsys vfs.FS) *Store {
	t.Helper()
	s, err := Open("/db", &Options{FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
