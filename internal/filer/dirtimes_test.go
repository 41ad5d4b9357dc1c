package filer

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestDirectoryTimesFollowNames: adding or removing a name in a directory
// (create, mkdir, delete, rename in and out) sets the directory's mtime and
// ctime to the time of the change, to within dirTimesResolution.
func TestDirectoryTimesFollowNames(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	var clock atomic.Int64
	at := func(d time.Duration) { clock.Store(int64(d)) }
	e := newEnv(t, Config{Now: func() time.Time { return t0.Add(time.Duration(clock.Load())) }})
	ctx := context.Background()
	times := func(p string) (time.Duration, time.Duration) {
		t.Helper()
		d, err := e.f.FindEntry(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return d.Mtime.Sub(t0), d.Ctime.Sub(t0)
	}
	expect := func(step, p string, want time.Duration) {
		t.Helper()
		if m, c := times(p); m != want || c != want {
			t.Fatalf("%s: %s has mtime %v, ctime %v after t0; want both %v", step, p, m, c, want)
		}
	}

	if err := e.f.Mkdir(ctx, "/d", 0o755, true); err != nil {
		t.Fatal(err)
	}
	at(500 * time.Millisecond)
	e.write(t, "/d/a", []byte("a"))
	expect("a create within the resolution", "/d", 0)

	at(2 * time.Second)
	e.write(t, "/d/b", []byte("b"))
	expect("create", "/d", 2*time.Second)

	at(4 * time.Second)
	if err := e.f.DeleteEntry(ctx, "/d/b", false); err != nil {
		t.Fatal(err)
	}
	expect("delete", "/d", 4*time.Second)

	at(6 * time.Second)
	if err := e.f.Mkdir(ctx, "/e", 0o755, true); err != nil {
		t.Fatal(err)
	}
	at(8 * time.Second)
	if err := e.f.Rename(ctx, "/d/a", "/e/a"); err != nil {
		t.Fatal(err)
	}
	expect("rename, source", "/d", 8*time.Second)
	expect("rename, target", "/e", 8*time.Second)

	at(10 * time.Second)
	if err := e.f.Mkdir(ctx, "/d/x/y", 0o755, false); err != nil { // makes /d/x too
		t.Fatal(err)
	}
	expect("mkdir of a missing parent", "/d", 10*time.Second)
	expect("mkdir, the parent made with it", "/d/x", 10*time.Second)

	// A directory whose mtime utimens set in the future is set back to now
	// by the next change of its names, as POSIX says.
	at(12 * time.Second)
	if err := e.f.ModifyEntry(ctx, "/e", func(d *Entry) error { d.Mtime = t0.Add(time.Hour); return nil }); err != nil {
		t.Fatal(err)
	}
	at(12*time.Second + time.Millisecond)
	e.write(t, "/e/new", nil)
	expect("a change after an mtime in the future", "/e", 12*time.Second+time.Millisecond)
}
