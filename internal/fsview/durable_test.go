package fsview

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kelpfs/kelp/internal/filer/store/pebble"
	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/testcluster"
	"github.com/kelpfs/kelp/internal/testutil"
)

// runFilerOn runs a filer whose Pebble store lives in fsys; stop ends it
// and closes the store.
func runFilerOn(t *testing.T, masters []string, fsys vfs.FS) (s *filerserver.Server, stop func()) {
	t.Helper()
	st, err := pebble.Open("/meta", &pebble.Options{FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	s, err = filerserver.New(filerserver.Config{Masters: masters, MetaStore: st, ChunkSize: 64 << 10,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var stopped bool
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
			st.Close()
		}
	}
	t.Cleanup(stop)
	return s, stop
}

// TestFsyncedFileSurvivesFilerPowerCut: with deferred durability (creates
// and background commits answer before the filer's store syncs), a file
// fsync'ed through the view is in the filer's store after a power cut of
// the filer taken right after fsync returned: one fsync'ed while dirty, one
// committed in the background after close and then fsync'ed (its flush
// has nothing left to commit: only the filer's Sync makes it durable), and
// a directory of files closed and then made durable by Sync (FSYNCDIR).
func TestFsyncedFileSurvivesFilerPowerCut(t *testing.T) {
	ctx := context.Background()
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}}})
	mem := vfs.NewCrashableMem()
	s, stop := runFilerOn(t, c.MasterAddrs(), mem)
	v, err := New(ctx, Config{Filer: s.GRPCAddr(), Logger: slog.New(slog.DiscardHandler), DeferDurability: true})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()

	// Dirty at fsync.
	h, err := v.Create(ctx, "/dirty", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.WriteAt(ctx, []byte("dirty data"), 0); err != nil {
		t.Fatal(err)
	}
	if err := h.Fsync(ctx); err != nil {
		t.Fatal(err)
	}
	crash1 := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	h.ReleaseLater()

	// Committed in the background after close, then fsync'ed.
	h, err = v.Create(ctx, "/closed", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.WriteAt(ctx, []byte("closed data"), 0); err != nil {
		t.Fatal(err)
	}
	h.ReleaseLater()
	testutil.WaitFor(t, 10*time.Second, func() bool {
		v.mu.Lock()
		defer v.mu.Unlock()
		return v.files["/closed"] == nil
	}, "the background commit of /closed")
	h, err = v.Open(ctx, "/closed", os.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Fsync(ctx); err != nil {
		t.Fatal(err)
	}
	crash2 := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	h.ReleaseLater()

	// Closed files, then FSYNCDIR.
	if _, err := v.Mkdir(ctx, "/dir", 0o755, 0, 0); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c"} {
		h, err := v.Create(ctx, "/dir/"+n, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.WriteAt(ctx, []byte("file "+n), 0); err != nil {
			t.Fatal(err)
		}
		h.ReleaseLater()
	}
	if err := v.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	crash3 := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	v.Close()
	stop()

	for i, crashed := range []*vfs.MemFS{crash1, crash2, crash3} {
		s2, stop2 := runFilerOn(t, c.MasterAddrs(), crashed)
		v2 := newView(t, s2)
		want := map[string]string{"/dirty": "dirty data"}
		if i >= 1 {
			want["/closed"] = "closed data"
		}
		if i >= 2 {
			for _, n := range []string{"a", "b", "c"} {
				want["/dir/"+n] = "file " + n
			}
		}
		for p, w := range want {
			if _, err := v2.Lookup(ctx, p); err != nil {
				t.Fatalf("power cut %d: %s fsync'ed, then lost: %v", i+1, p, err)
			}
			if got := readFile(t, v2, p); !bytes.Equal(got, []byte(w)) {
				t.Fatalf("power cut %d: %s reads %q, want %q", i+1, p, got, w)
			}
		}
		v2.Close()
		stop2()
	}
}
