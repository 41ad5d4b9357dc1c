package filer

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/chunk/chunktest"
	"github.com/kelpfs/kelp/internal/filer/store"
	"github.com/kelpfs/kelp/internal/filer/store/pebble"
	"github.com/kelpfs/kelp/internal/filer/store/pebble/pebbletest"
	"github.com/kelpfs/kelp/internal/testutil"
)

// updateCounter counts Store.Update calls in progress.
type updateCounter struct {
	store.Store
	inFlight atomic.Int32
}

func (s *updateCounter) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	return s.Store.Update(ctx, fn)
}

// TestGCDeletesOnlyDurablyQueuedBlobs: a delete's commit becomes visible
// before its WAL sync returns. The garbage collector must not delete the
// blobs it finds queued until that commit is durable: after a power cut the
// delete may be gone, and the file with it would point at deleted data.
func TestGCDeletesOnlyDurablyQueuedBlobs(t *testing.T) {
	ctx := context.Background()
	f, st, fsys, mem := newStalledFiler(t)
	blobs := f.blobs.(*chunktest.Mem)
	fid, err := blobs.Put(ctx, []byte("precious"))
	if err != nil {
		t.Fatal(err)
	}
	e := &Entry{Path: "/f", Mode: 0o644, Size: 8, Chunks: []chunk.Chunk{{FID: fid, Size: 8}}}
	if err := f.CreateEntry(ctx, e, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}

	release := fsys.Stall()
	t.Cleanup(release)
	deleted := make(chan error, 1)
	go func() { deleted <- f.DeleteEntry(ctx, "/f", false) }()
	testutil.WaitFor(t, 10*time.Second, func() bool {
		n, err := f.PendingGarbage(ctx)
		return err == nil && n > 0 && fsys.Stalled() > 0
	}, "the delete to be visible, waiting for its WAL sync")
	collected := make(chan error, 1)
	go func() { _, err := f.CollectGarbage(ctx); collected <- err }()
	testutil.WaitFor(t, 10*time.Second, func() bool {
		return !blobs.Has(fid) || st.inFlight.Load() >= 2
	}, "the collector to delete the blob or wait")
	blobGone := !blobs.Has(fid)
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	release()
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	if err := <-collected; err != nil {
		t.Fatal(err)
	}
	if !blobGone {
		return
	}
	af := reopenFiler(t, crashed)
	if _, err := af.FindEntry(ctx, "/f"); err == nil {
		t.Fatal("the collector deleted the blob of /f before the delete of /f was durable; after the power cut /f is back without its data")
	}
}

// TestEventsHandedOutOnlyWhenDurable: an event read while its commit
// waits for its fsync, then lost in a power cut, would have its sequence
// number reused by another change, which a subscriber resuming after it
// would never see.
func TestEventsHandedOutOnlyWhenDurable(t *testing.T) {
	ctx := context.Background()
	f, st, fsys, mem := newStalledFiler(t)
	since, err := f.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	release := fsys.Stall()
	t.Cleanup(release)
	created := make(chan error, 1)
	go func() { created <- f.CreateEntry(ctx, &Entry{Path: "/new", Mode: 0o644}, CreateOptions{}) }()
	testutil.WaitFor(t, 10*time.Second, func() bool {
		seq, err := f.LastSeq(ctx)
		return err == nil && seq > since && fsys.Stalled() > 0
	}, "the create to be visible, waiting for its WAL sync")
	type result struct {
		evs []*Event
		err error
	}
	read := make(chan result, 1)
	go func() { evs, err := f.ReadEvents(ctx, since, 10); read <- result{evs, err} }()
	var handed []*Event
	testutil.WaitFor(t, 10*time.Second, func() bool {
		select {
		case r := <-read:
			if r.err != nil {
				t.Fatal(r.err)
			}
			handed = r.evs
			read <- r
			return true
		default:
			return st.inFlight.Load() >= 2
		}
	}, "the reader to answer or wait")
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	release()
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	if r := <-read; r.err != nil {
		t.Fatal(r.err)
	}
	if len(handed) == 0 {
		return
	}
	af := reopenFiler(t, crashed)
	kept, err := af.ReadEvents(ctx, since, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) < len(handed) {
		t.Fatalf("event %d was handed out before it was durable; after the power cut the log ends at %d events", handed[len(handed)-1].Seq, len(kept))
	}
}

func newStalledFiler(t *testing.T) (*Filer, *updateCounter, *pebbletest.StallFS, *vfs.MemFS) {
	t.Helper()
	mem := vfs.NewCrashableMem()
	fsys := pebbletest.NewStallFS(mem)
	pst, err := pebble.Open("/meta", &pebble.Options{FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	st := &updateCounter{Store: pst}
	f, err := New(Config{Store: st, Blobs: chunktest.New(), GCInterval: time.Hour, GCDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close(); pst.Close() })
	return f, st, fsys, mem
}

func reopenFiler(t *testing.T, fsys vfs.FS) *Filer {
	t.Helper()
	st, err := pebble.Open("/meta", &pebble.Options{FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(Config{Store: st, Blobs: chunktest.New(), GCInterval: time.Hour, GCDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close(); st.Close() })
	return f
}

// TestDeferredCreateSyncAndEvents: a create under deferred durability
// answers while its WAL sync is stalled and is visible at once; Sync waits
// for that sync, subscribers get its event only once it is durable, and
// after Sync it survives a power cut.
func TestDeferredCreateSyncAndEvents(t *testing.T) {
	ctx := context.Background()
	f, st, fsys, mem := newStalledFiler(t)
	since, err := f.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	release := fsys.Stall()
	t.Cleanup(release)
	e := &Entry{Path: "/d/f", Mode: 0o644}
	if err := f.CreateEntry(store.WithDeferredDurability(ctx), e, CreateOptions{Exclusive: true}); err != nil {
		t.Fatalf("deferred create: %v", err)
	}
	if _, err := f.FindEntry(ctx, "/d/f"); err != nil {
		t.Fatalf("deferred create not visible: %v", err)
	}
	// Exclusivity is checked in the transaction, durable or not.
	if err := f.CreateEntry(store.WithDeferredDurability(ctx), e, CreateOptions{Exclusive: true}); !errors.Is(err, ErrExists) {
		t.Fatalf("second exclusive create: %v, want ErrExists", err)
	}

	subCtx, stop := context.WithCancel(ctx)
	defer stop()
	events := make(chan *Event, 16)
	go f.Subscribe(subCtx, since, func(ev *Event) error { events <- ev; return nil })
	synced := make(chan error, 1)
	go func() { synced <- f.Sync(ctx) }()
	testutil.WaitFor(t, 10*time.Second, func() bool { return st.inFlight.Load() >= 2 },
		"Sync and the subscriber to wait for the deferred commit's sync")
	select {
	case err := <-synced:
		t.Fatalf("Sync answered (%v) while the deferred create's WAL sync is stalled", err)
	case ev := <-events:
		t.Fatalf("event %d handed out before its commit is durable", ev.Seq)
	default:
	}
	release()
	if err := <-synced; err != nil {
		t.Fatalf("sync: %v", err)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	select {
	case <-events:
	case <-time.After(10 * time.Second):
		t.Fatal("no event after the sync")
	}
	af := reopenFiler(t, crashed)
	if _, err := af.FindEntry(ctx, "/d/f"); err != nil {
		t.Fatalf("deferred create lost after Sync and a power cut: %v", err)
	}
}
