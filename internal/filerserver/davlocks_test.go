package filerserver

import (
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// TestDavLockConflicts checks the lock table's conflict rules: shared
// with shared coexist, exclusive conflicts with both, depth infinity
// covers the subtree, and a deep write needs the tokens of locks below.
func TestDavLockConflicts(t *testing.T) {
	d, now := newDavLocks(), time.Now()
	create := func(root string, shared, zero, deep bool) (string, bool) {
		l, err := d.create(now, &filerpb.DavLockRequest{Root: root, Shared: shared, ZeroDepth: zero, Deep: deep, DurationNs: -1})
		if err != nil {
			return "", false
		}
		return l.token, true
	}
	a, ok1 := create("/c", true, false, false)
	_, ok2 := create("/c", true, false, false)
	if !ok1 || !ok2 {
		t.Fatal("two shared locks of /c did not coexist")
	}
	if _, ok := create("/c", false, true, false); ok {
		t.Fatal("an exclusive lock of a shared-locked resource was granted")
	}
	if _, ok := create("/c/x/y", true, true, false); !ok {
		t.Fatal("a shared lock below a shared depth-infinity lock was refused")
	}
	if _, ok := create("/c/x", false, true, false); ok {
		t.Fatal("an exclusive lock below a depth-infinity lock was granted")
	}
	if _, ok := create("/", false, false, false); ok {
		t.Fatal("an exclusive depth-infinity lock above a lock was granted")
	}
	m, ok := create("/d/m", false, true, false)
	if !ok {
		t.Fatal("exclusive lock of /d/m refused")
	}
	if _, ok := create("/d", false, true, false); !ok {
		t.Fatal("a depth-0 lock of the parent of a locked member was refused")
	}
	if _, ok := create("/e", false, true, true); !ok {
		t.Fatal("a guard of an unlocked /e was refused")
	}
	if _, ok := create("/d", false, true, true); ok {
		t.Fatal("a deep guard of /d was granted though /d/m is locked")
	}
	confirm := func(target string, deep bool, tokens ...string) error {
		return d.confirm(&filerpb.DavLockRequest{Targets: []string{target}, Deep: deep, Tokens: tokens})
	}
	if confirm("/c/f", false, a) != nil {
		t.Fatal("a write below /c with a shared token of /c was refused")
	}
	if confirm("/c/f", false) == nil {
		t.Fatal("a write below /c without a token was allowed")
	}
	if confirm("/d/n", true) != nil {
		t.Fatal("a write of an unlocked member was refused")
	}
	// /d holds a depth-0 lock (no token submitted for it) and /d/m one.
	if confirm("/d", true, m) == nil {
		t.Fatal("a deep write of /d without /d's own token was allowed")
	}
	d.dropBelow("/d")
	if confirm("/d", true) != nil {
		t.Fatal("locks below a dropped root remain")
	}
}
