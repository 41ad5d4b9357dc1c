package filerserver

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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

// TestPosixLockDeadlock: A holds 0-9 and waits for B's 10-19; B asking
// for A's 0-9 would wait forever: EDEADLK (Aborted) instead, and A gets
// its lock once B lets go.
func TestPosixLockDeadlock(t *testing.T) {
	tbl := newPosixLocks()
	ctx := context.Background()
	req := func(op filerpb.PosixLockRequest_Op, session string, typ uint32, start, end uint64) *filerpb.PosixLockRequest {
		return &filerpb.PosixLockRequest{Op: op, Session: session, Path: "/f", Owner: 1, Type: typ, Start: start, End: end}
	}
	for _, r := range []*filerpb.PosixLockRequest{req(filerpb.PosixLockRequest_SET, "a", lockWrite, 0, 9), req(filerpb.PosixLockRequest_SET, "b", lockWrite, 10, 19)} {
		if res, err := tbl.do(ctx, r); err != nil || res.Conflict {
			t.Fatalf("%v: %v %v", r, res, err)
		}
	}
	got := make(chan error, 1)
	go func() {
		_, err := tbl.do(ctx, req(filerpb.PosixLockRequest_SET_WAIT, "a", lockWrite, 10, 19))
		got <- err
	}()
	for { // until a waits for b
		tbl.mu.Lock()
		n := len(tbl.waiting)
		tbl.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond) // polling a condition
	}
	_, err := tbl.do(ctx, req(filerpb.PosixLockRequest_SET_WAIT, "b", lockWrite, 0, 9))
	if status.Code(err) != codes.Aborted {
		t.Fatalf("b waiting for a while a waits for b: %v, want Aborted (EDEADLK)", err)
	}
	// A read lock of another owner on a free range still just works, and a
	// wait with no cycle is no deadlock.
	if res, err := tbl.do(ctx, req(filerpb.PosixLockRequest_SET, "c", lockRead, 30, 39)); err != nil || res.Conflict {
		t.Fatalf("unrelated lock: %v %v", res, err)
	}
	if _, err := tbl.do(ctx, req(filerpb.PosixLockRequest_SET, "b", lockUnlock, 10, 19)); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("a's wait after b let go: %v", err)
	}
	tbl.mu.Lock()
	defer tbl.mu.Unlock()
	if len(tbl.waiting) != 0 {
		t.Fatalf("wait records left: %v", tbl.waiting)
	}
}
