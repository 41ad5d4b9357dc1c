package filerserver

import (
	"context"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

func TestPosixLockLeaseExpiry(t *testing.T) {
	tbl := newPosixLocks()
	ctx := context.Background()
	set := func(session string, typ uint32) *filerpb.PosixLockResponse {
		r, err := tbl.do(ctx, &filerpb.PosixLockRequest{Op: filerpb.PosixLockRequest_SET, Session: session, Path: "/f",
			Owner: 1, Type: typ, Start: 0, End: 99})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if set("a", lockWrite).Conflict {
		t.Fatal("first lock conflicts")
	}
	if !set("b", lockRead).Conflict {
		t.Fatal("a read lock over another session's write lock was granted")
	}
	// Session a stops renewing: once its lease ran out its locks go.
	tbl.mu.Lock()
	tbl.sessions["a"] = time.Now().Add(-2 * tbl.lease)
	tbl.mu.Unlock()
	if set("b", lockWrite).Conflict {
		t.Fatal("the lock of a session whose lease ran out still holds")
	}
	// END_SESSION releases at once.
	if _, err := tbl.do(ctx, &filerpb.PosixLockRequest{Op: filerpb.PosixLockRequest_END_SESSION, Session: "b"}); err != nil {
		t.Fatal(err)
	}
	if set("c", lockWrite).Conflict {
		t.Fatal("the lock of an ended session still holds")
	}
	// Bad requests are InvalidArgument, not a crash.
	for _, r := range []*filerpb.PosixLockRequest{{Session: ""}, {Session: "x", Path: "/f", Type: 7}, {Session: "x", Path: "/f", Start: 5, End: 1}} {
		if _, err := tbl.do(ctx, r); err == nil {
			t.Fatalf("request %v accepted", r)
		}
	}
}
