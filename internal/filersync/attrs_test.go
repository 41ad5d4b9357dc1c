package filersync

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/filer"
	"github.com/kelpfs/kelp/internal/filerserver"
)

// attrsOf is what the sync carries besides data, as a comparable string:
// permission bits, owner, MIME type, xattrs (not the sync's marker) and,
// for files, mtime.
func attrsOf(t testing.TB, s *filerserver.Server, p string) string {
	t.Helper()
	e, err := s.Filer().FindEntry(context.Background(), p)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	var xs []string
	for k, v := range e.Xattrs {
		if k != XattrOrigin {
			xs = append(xs, k+"="+string(v))
		}
	}
	slices.Sort(xs)
	mtime := ""
	if !e.IsDir() {
		mtime = fmt.Sprint(e.Mtime.UnixNano())
	}
	return fmt.Sprintf("%v %d:%d %q %s %s", e.Mode, e.UID, e.GID, e.Mime, strings.Join(xs, ","), mtime)
}

func modify(t testing.TB, s *filerserver.Server, p string, fn func(e *filer.Entry)) {
	t.Helper()
	err := s.Filer().ModifyEntry(context.Background(), p, func(e *filer.Entry) error { fn(e); return nil })
	if err != nil {
		t.Fatalf("modify %s: %v", p, err)
	}
}

// waitAttrs waits until p has the same attributes on both sites and the
// sync has caught up, and returns them.
func waitAttrs(t testing.TB, r *running, a, b *filerserver.Server, p string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		x, y := attrsOf(t, a, p), attrsOf(t, b, p)
		if x == y && r.s.CaughtUp(context.Background()) && attrsOf(t, a, p) == x && attrsOf(t, b, p) == y {
			return x
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: attributes differ: a %s, b %s; status %+v", p, x, y, r.s.Status(context.Background()))
		}
		time.Sleep(50 * time.Millisecond) // polling a condition
	}
}

func attrUpdates(r *running) int64 {
	var n int64
	for _, st := range r.s.Status(context.Background()) {
		n += st.Attrs
	}
	return n
}

// TestSyncAttributesOnly: chmod, chown, xattrs, MIME type and mtime
// changes travel both ways without copying data, a change on a synced copy
// goes back to the original, the attribute change made last wins, and
// nothing bounces back and forth.
func TestSyncAttributesOnly(t *testing.T) {
	a, b := startSite(t), startSite(t)
	put(t, a, "/p/f", data("f", 200<<10))
	put(t, b, "/p/g", []byte("g"))
	r := startSync(t, a, b, 2)
	waitConverged(t, r, a, b, time.Minute)
	copied := copies(r)

	// On the original (a): the change reaches the copy on b.
	modify(t, a, "/p/f", func(e *filer.Entry) {
		e.Mode = e.Mode.Type() | 0o600
		e.UID, e.GID, e.Mime = 1001, 1002, "text/x-kelp"
		e.Xattrs["user.colour"] = []byte("blue")
	})
	got := waitAttrs(t, r, a, b, "/p/f")
	if !strings.HasPrefix(got, "-rw------- 1001:1002 \"text/x-kelp\" user.colour=blue") {
		t.Fatalf("attributes after chmod on a: %s", got)
	}
	// On the copy (b): the change goes back to the original on a.
	modify(t, b, "/p/f", func(e *filer.Entry) {
		e.Mode = e.Mode.Type() | 0o640
		delete(e.Xattrs, "user.colour")
		e.Xattrs["user.shape"] = []byte("round")
	})
	if got := waitAttrs(t, r, a, b, "/p/f"); !strings.HasPrefix(got, "-rw-r----- 1001:1002 \"text/x-kelp\" user.shape=round") {
		t.Fatalf("attributes after chmod on b: %s", got)
	}
	// mtime alone (touch), and a directory's attributes.
	mt := time.Unix(1_600_000_000, 123)
	modify(t, b, "/p/g", func(e *filer.Entry) { e.Mtime = mt })
	if got := waitAttrs(t, r, a, b, "/p/g"); !strings.HasSuffix(got, fmt.Sprint(mt.UnixNano())) {
		t.Fatalf("mtime of /p/g: %s", got)
	}
	modify(t, a, "/p", func(e *filer.Entry) { e.Mode = os.ModeDir | 0o700; e.Xattrs["user.dir"] = []byte("x") })
	if got := waitAttrs(t, r, a, b, "/p"); !strings.HasPrefix(got, "drwx------") {
		t.Fatalf("directory attributes: %s", got)
	}
	if c := copies(r); c != copied {
		t.Errorf("attribute changes copied data: %d copies, want %d", c, copied)
	}

	// Both sites change the same file's attributes while the sync is
	// stopped; the later change (b's) wins on both.
	r.stop()
	modify(t, a, "/p/f", func(e *filer.Entry) { e.Mode = e.Mode.Type() | 0o604 })
	modify(t, b, "/p/f", func(e *filer.Entry) { e.Mode = e.Mode.Type() | 0o620 })
	modify(t, b, "/p/g", func(e *filer.Entry) { e.Xattrs["user.first"] = []byte("b") })
	modify(t, a, "/p/g", func(e *filer.Entry) { e.Xattrs["user.later"] = []byte("a") })
	r = startSync(t, a, b, 2)
	if got := waitAttrs(t, r, a, b, "/p/f"); !strings.HasPrefix(got, "-rw--w----") {
		t.Errorf("/p/f after concurrent changes: %s, want b's -rw--w----", got)
	}
	if got := waitAttrs(t, r, a, b, "/p/g"); !strings.Contains(got, "user.later=a") || strings.Contains(got, "user.first") {
		t.Errorf("/p/g after concurrent changes: %s, want a's", got)
	}
	if c := copies(r); c != 0 {
		t.Errorf("restart copied %d files", c)
	}
	// No ping-pong: once converged, a later unrelated write finds the
	// attribute updates where they were.
	n := attrUpdates(r)
	put(t, a, "/p/late", []byte("late"))
	waitConverged(t, r, a, b, time.Minute)
	if m := attrUpdates(r); m != n {
		t.Errorf("attribute updates went on after convergence: %d then %d", n, m)
	}
}
