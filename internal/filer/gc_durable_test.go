package filer

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/chunk/chunktest"
	"github.com/kelpfs/kelp/internal/filer/store"
	"github.com/kelpfs/kelp/internal/filer/store/pebble"
)

// walStall stalls Pebble's WAL syncs while its gate is set.
type walStall struct {
	vfs.FS
	gate    atomic.Pointer[chan struct{}]
	stalled atomic.Int32
}

func (f *walStall) wrap(name string, file vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return file, err
	}
	return &walStallFile{File: file, fs: f}, nil
}

func (f *walStall) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, c)
	return f.wrap(name, file, err)
}

func (f *walStall) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.ReuseForWrite(oldname, newname, c)
	return f.wrap(newname, file, err)
}

func (f *walStall) wait() {
	if g := f.gate.Load(); g != nil {
		f.stalled.Add(1)
		<-*g
		f.stalled.Add(-1)
	}
}

type walStallFile struct {
	vfs.File
	fs *walStall
}

func (f *walStallFile) Sync() error     { f.fs.wait(); return f.File.Sync() }
func (f *walStallFile) SyncData() error { f.fs.wait(); return f.File.SyncData() }
func (f *walStallFile) SyncTo(n int64) (bool, error) {
	f.fs.wait()
	return f.File.SyncTo(n)
}

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
	mem := vfs.NewCrashableMem()
	fsys := &walStall{FS: mem}
	pst, err := pebble.Open("/meta", &pebble.Options{FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	st := &updateCounter{Store: pst}
	blobs := chunktest.New()
	f, err := New(Config{Store: st, Blobs: blobs, GCInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { f.Close(); pst.Close() }()
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

	gate := make(chan struct{})
	release := sync.OnceFunc(func() { close(gate) })
	defer release()
	fsys.gate.Store(&gate)
	deleted := make(chan error, 1)
	go func() { deleted <- f.DeleteEntry(ctx, "/f", false) }()
	waitUntil(t, "the delete to wait for its WAL sync", func() bool { return fsys.stalled.Load() > 0 })
	collected := make(chan error, 1)
	go func() { _, err := f.CollectGarbage(ctx); collected <- err }()
	waitUntil(t, "the collector to delete the blob or wait", func() bool {
		return !blobs.Has(fid) || st.inFlight.Load() >= 2
	})
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
	after, err := pebble.Open("/meta", &pebble.Options{FS: crashed})
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	af, err := New(Config{Store: after, Blobs: chunktest.New(), GCInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer af.Close()
	if _, err := af.FindEntry(ctx, "/f"); err == nil {
		t.Fatal("the collector deleted the blob of /f before the delete of /f was durable; after the power cut /f is back without its data")
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}
