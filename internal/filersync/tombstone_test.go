package filersync

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/filerserver"
)

func exists(t testing.TB, s *filerserver.Server, p string) bool {
	t.Helper()
	e, err := s.Filer().FindEntry(context.Background(), p)
	if err != nil && e == nil {
		return false
	}
	return e != nil
}

func trimAll(t testing.TB, ss ...*filerserver.Server) {
	t.Helper()
	for _, s := range ss {
		if _, err := s.Filer().TrimEvents(context.Background(), time.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSyncComparisonKeepsDeletes: files deleted while the sync is stopped,
// with both event logs trimmed since, so both directions compare the trees.
// A copy the sync made, unchanged since, whose original was deleted, is
// deleted too rather than copied back; a copy changed since is kept. The
// delete of a copy leaves no trace a comparison can see: the original
// comes back (docs/filer-sync.md).
func TestSyncComparisonKeepsDeletes(t *testing.T) {
	a, b := startSite(t), startSite(t)
	for _, p := range []string{"/t/a1", "/t/a2", "/t/a3", "/t/dir/a4", "/t/keep"} {
		put(t, a, p, []byte(p+" written on a"))
	}
	put(t, b, "/t/b1", []byte("b1 written on b"))
	r := startSync(t, a, b, 2)
	waitConverged(t, r, a, b, time.Minute)
	r.stop()

	do(t, http.MethodDelete, fileURL(a, "/t/a1")) // b's copy unchanged: deleted on b
	do(t, http.MethodDelete, fileURL(b, "/t/a2")) // b's copy: a's original comes back
	do(t, http.MethodDelete, fileURL(a, "/t/a3")) // b changed its copy after: it stays
	put(t, b, "/t/a3", []byte("a3 changed on b"))
	do(t, http.MethodDelete, fileURL(a, "/t/dir")+"?recursive=true") // a directory of copies
	trimAll(t, a, b)

	r = startSync(t, a, b, 2)
	waitConverged(t, r, a, b, time.Minute)
	for _, p := range []string{"/t/a1", "/t/dir/a4", "/t/dir"} {
		if exists(t, a, p) || exists(t, b, p) {
			t.Errorf("%s was deleted while the sync was stopped and is back", p)
		}
	}
	if got := string(get(t, a, "/t/a3")); got != "a3 changed on b" {
		t.Errorf("/t/a3 on a = %q, want b's change (an update wins over a delete)", got)
	}
	for _, p := range []string{"/t/keep", "/t/b1", "/t/a2"} {
		if !exists(t, a, p) {
			t.Errorf("%s is gone", p)
		}
	}
}

// TestSyncUpdateWinsOverDelete: while the sync is stopped, b changes files
// and a deletes them afterwards. Whichever direction applies its change
// first, the update wins: the files stay on both sides with b's content.
func TestSyncUpdateWinsOverDelete(t *testing.T) {
	a, b := startSite(t), startSite(t)
	const n = 6
	paths := make([]string, n)
	for i := range paths {
		paths[i] = "/u/f" + string(rune('0'+i))
		put(t, a, paths[i], []byte("original"))
	}
	r := startSync(t, a, b, 4)
	waitConverged(t, r, a, b, time.Minute)
	r.stop()
	for _, p := range paths {
		put(t, b, p, []byte("changed on b"))
	}
	for _, p := range paths {
		do(t, http.MethodDelete, fileURL(a, p)) // later than b's change
	}
	r = startSync(t, a, b, 4)
	waitConverged(t, r, a, b, time.Minute)
	for _, p := range paths {
		if !exists(t, a, p) {
			t.Errorf("%s: deleted; b's update should have won", p)
			continue
		}
		if got := string(get(t, a, p)); got != "changed on b" {
			t.Errorf("%s on a = %q", p, got)
		}
	}
}

// TestSyncDeleteBeatsItsOwnCopy: b deletes a file while a stale copy of
// a's version is on its way back to b (as a tree comparison racing the
// delete does). The copy must not cancel the delete: the file ends up
// deleted on both sides.
func TestSyncDeleteBeatsItsOwnCopy(t *testing.T) {
	a, b := startSite(t), startSite(t)
	put(t, a, "/r/x", []byte("x written on a"))
	r := startSync(t, a, b, 2)
	waitConverged(t, r, a, b, time.Minute)
	r.stop()

	do(t, http.MethodDelete, fileURL(b, "/r/x"))
	// The stale copy: a to b's copy of a's /r/x lands after the delete.
	s, err := New(context.Background(), Config{A: a.GRPCAddr(), B: b.GRPCAddr()})
	if err != nil {
		t.Fatal(err)
	}
	se, err := s.a.Lookup(context.Background(), "/r/x")
	if err != nil || se == nil {
		t.Fatal(se, err)
	}
	if err := s.dirs[0].copyEntry(context.Background(), se, "/r/x"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if !exists(t, b, "/r/x") {
		t.Fatal("the stale copy did not land")
	}

	r = startSync(t, a, b, 2)
	waitConverged(t, r, a, b, time.Minute)
	if exists(t, a, "/r/x") || exists(t, b, "/r/x") {
		t.Error("/r/x was deleted on b and is back")
	}
}

// TestSyncComparisonKeepsItsPosition: a tree comparison fails half way
// (here on cue); the next attempt follows the log from the position read
// before the first, so a delete made between the attempts is applied.
func TestSyncComparisonKeepsItsPosition(t *testing.T) {
	a, b := startSite(t), startSite(t)
	put(t, b, "/p/z", []byte("same on both")) // b's first, a's newer
	put(t, a, "/p/z", []byte("same on both"))
	for i := range 10 {
		put(t, a, "/p/f"+string(rune('0'+i)), []byte("f"))
	}
	var failed atomic.Bool
	r := startSyncWith(t, Config{A: a.GRPCAddr(), B: b.GRPCAddr(), Workers: 1}, func(s *Syncer) {
		s.testCompared = func(d *direction, sp string) error {
			if d.src.Name == "a" && sp == "/p/f3" && !failed.Swap(true) {
				do(t, http.MethodDelete, fileURL(a, "/p/z"))
				return errors.New("cut here")
			}
			return nil
		}
	})
	waitConverged(t, r, a, b, time.Minute)
	if !failed.Load() {
		t.Fatal("the comparison never failed")
	}
	if exists(t, a, "/p/z") || exists(t, b, "/p/z") {
		t.Error("/p/z, deleted on a during the comparison, is back")
	}
}

func TestWalkBefore(t *testing.T) {
	for _, c := range []struct {
		x, y string
		want bool
	}{
		{"", "a", true}, {"a", "", false}, {"a", "a", false}, {"a", "a/b", true}, {"a/b", "a", false},
		{"a/z", "b", true}, {"b", "a/z", false}, {"d1/f9", "d10", true}, {"d10/f1", "d1/f9", false},
	} {
		if got := walkBefore(c.x, c.y); got != c.want {
			t.Errorf("walkBefore(%q, %q) = %v", c.x, c.y, got)
		}
	}
}

// TestSyncOneTrimmedLogConverges: only a's log is trimmed, so a to b
// compares the trees while b to a follows its log. A delete of a's
// original reaches b; b's file deleted on a (a copy there) comes back to a
// rather than staying on b alone.
func TestSyncOneTrimmedLogConverges(t *testing.T) {
	a, b := startSite(t), startSite(t)
	put(t, a, "/o/a1", []byte("a1 written on a"))
	put(t, b, "/o/b1", []byte("b1 written on b"))
	put(t, b, "/o/b2", []byte("b2 written on b"))
	r := startSync(t, a, b, 2)
	waitConverged(t, r, a, b, time.Minute)
	r.stop()
	do(t, http.MethodDelete, fileURL(a, "/o/a1"))
	do(t, http.MethodDelete, fileURL(a, "/o/b1"))
	trimAll(t, a)
	r = startSync(t, a, b, 2)
	waitConverged(t, r, a, b, time.Minute)
	if exists(t, a, "/o/a1") || exists(t, b, "/o/a1") {
		t.Error("/o/a1, deleted on a, is back")
	}
	if !exists(t, a, "/o/b1") {
		t.Error("/o/b1 is missing on a")
	}
	if got := copies(r); got != 1 {
		t.Errorf("%d copies, want 1 (/o/b1 back to a)", got)
	}
}
