package filer

import (
	"context"
	"os"
	"testing"
	"time"
)

// The root's attributes can be set like any directory's, are logged as an
// update of "/", and are kept across a restart; until then the root is a
// directory of mode 0755. Names made at the top level do not move its
// times (see namesChanged).
func TestRootAttributesAreStored(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	root := func() *Entry {
		t.Helper()
		r, err := e.f.FindEntry(ctx, "/")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := root(); r.Mode != os.ModeDir|0o755 || !r.Mtime.IsZero() {
		t.Fatalf("a new root: mode %v, mtime %v", r.Mode, r.Mtime)
	}
	mtime := time.Unix(1_700_000_000, 0)
	if err := e.f.ModifyEntry(ctx, "/", func(r *Entry) error {
		r.Mode = os.ModeDir | os.ModeSticky | 0o777
		r.UID, r.GID, r.Mtime = 1000, 1000, mtime
		r.Xattrs["user.k"] = []byte("v")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.write(t, "/top", []byte("x"))
	evs, err := e.f.ReadEvents(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Type != EventUpdate || evs[0].New.Path != "/" || evs[1].New.Path != "/top" {
		t.Fatalf("events %+v", evs)
	}
	e.restart(t, Config{})
	r := root()
	if r.Mode != os.ModeDir|os.ModeSticky|0o777 || r.UID != 1000 || r.GID != 1000 || !r.Mtime.Equal(mtime) ||
		string(r.Xattrs["user.k"]) != "v" || r.Ctime.IsZero() {
		t.Fatalf("the root after a restart: %+v", r)
	}
	if err := e.f.UpdateEntry(ctx, &Entry{Path: "/", Mode: 0o644}); err == nil {
		t.Fatal("the root became a file")
	}
}
