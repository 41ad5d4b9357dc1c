package fsview

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestDirectoryTimesFollowChangesOfNames: a create, unlink or rename in a
// directory moves its mtime and ctime at once for the view that made it
// (the create answered early included), and for another view once the
// filer's event arrives; a directory's mtime set by utimens after creates
// in it (tar, rsync) stays as set.
func TestDirectoryTimesFollowChangesOfNames(t *testing.T) {
	s := startFiler(t)
	ctx := context.Background()
	a := newMountLikeView(t, s)
	b := newView(t, s)
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	setMtime := func(p string, at time.Time) {
		t.Helper()
		if _, err := a.Setattr(ctx, p, nil, SetAttr{Mtime: &at}); err != nil {
			t.Fatal(err)
		}
	}
	// changedSince checks that view fs shows /d changed at or after since.
	changedSince := func(step string, fs *FS, since time.Time) {
		t.Helper()
		at, err := fs.Lookup(ctx, "/d")
		if err != nil {
			t.Fatal(err)
		}
		if at.Mtime.Before(since) || at.Ctime.Before(since) {
			t.Fatalf("%s: /d has mtime %v, ctime %v; want both at or after %v", step, at.Mtime, at.Ctime, since)
		}
	}
	// eventually waits for view b to see the change (the filer's event).
	eventually := func(step string, since time.Time) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			at, err := b.Lookup(ctx, "/d")
			if err != nil {
				t.Fatal(err)
			}
			if !at.Mtime.Before(since) && !at.Ctime.Before(since) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the other view still shows /d with mtime %v, ctime %v", step, at.Mtime, at.Ctime)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// Within the filer's resolution: a directory made a moment ago keeps
	// its times in the filer, and the view that made the change shows it.
	if _, err := a.Mkdir(ctx, "/d", 0o755, 0, 0); err != nil {
		t.Fatal(err)
	}
	made, err := a.Lookup(ctx, "/d")
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	for !before.After(made.Mtime) || !before.After(made.Ctime) { // a coarse clock
		before = time.Now()
	}
	h, err := a.Create(ctx, "/d/new", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	changedSince("a create answered early", a, before)
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	changedSince("a create answered early, committed", a, before)

	setMtime("/d", old)
	if at, _ := b.Lookup(ctx, "/d"); !at.Mtime.Equal(old) { // cached in b now
		t.Fatalf("/d has mtime %v, want %v", at.Mtime, old)
	}

	before = time.Now()
	writeFile(t, a, "/d/f", []byte("x"))
	changedSince("create", a, before)
	eventually("create", before)

	setMtime("/d", old)
	before = time.Now()
	if err := a.Rename(ctx, "/d/f", "/g", false); err != nil {
		t.Fatal(err)
	}
	changedSince("rename out", a, before)
	eventually("rename out", before)

	setMtime("/d", old)
	writeFile(t, a, "/d/h", nil)
	setMtime("/d", old)
	before = time.Now()
	if err := a.Unlink(ctx, "/d/h"); err != nil {
		t.Fatal(err)
	}
	changedSince("unlink", a, before)
	eventually("unlink", before)

	// As tar does: fill the directory, then set its mtime.
	for _, name := range []string{"/d/t1", "/d/t2", "/d/t3"} {
		writeFile(t, a, name, []byte(name))
	}
	setMtime("/d", old)
	if err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, fs := range []*FS{a, newView(t, s)} {
		if at, _ := fs.Lookup(ctx, "/d"); !at.Mtime.Equal(old) {
			t.Fatalf("after creates then utimens: /d has mtime %v, want %v", at.Mtime, old)
		}
	}
}

// TestCtimeNeverGoesBack: the ctime a Setattr answers (before the filer's
// own is known) is not later than the one the filer stored, which a stat
// shows once the kernel's copy expires.
func TestCtimeNeverGoesBack(t *testing.T) {
	s := startFiler(t)
	ctx := context.Background()
	fs := newView(t, s)
	writeFile(t, fs, "/f", []byte("x"))
	if _, err := fs.Mkdir(ctx, "/d", 0o755, 0, 0); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/f", "/d"} {
		for i := range 20 {
			uid := uint32(i)
			answered, err := fs.Setattr(ctx, p, nil, SetAttr{UID: &uid})
			if err != nil {
				t.Fatal(err)
			}
			stored, err := newView(t, s).Lookup(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if stored.Ctime.Before(answered.Ctime) {
				t.Fatalf("%s: chown answered ctime %v, the filer keeps %v: it went back", p, answered.Ctime, stored.Ctime)
			}
		}
	}
}
