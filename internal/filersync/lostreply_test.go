package filersync

import (
	"context"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// lateFiler loses the answer of the first CreateEntry: the request is held
// and answered UNAVAILABLE, and reaches the filer only when the next
// CreateEntry is sent (a request stuck in the network that lands after
// the client gave up on it).
type lateFiler struct {
	filerpb.FilerClient
	mu      sync.Mutex
	held    *filerpb.CreateEntryRequest
	calls   int
	created int // CreateEntry calls the filer accepted
}

func (f *lateFiler) CreateEntry(ctx context.Context, req *filerpb.CreateEntryRequest, opts ...grpc.CallOption) (*filerpb.CreateEntryResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls == 1 {
		f.held = req
		return nil, status.Error(codes.Unavailable, "connection lost")
	}
	if f.held != nil {
		if _, err := f.FilerClient.CreateEntry(ctx, f.held, opts...); err == nil {
			f.created++
		}
		f.held = nil
	}
	resp, err := f.FilerClient.CreateEntry(ctx, req, opts...)
	if err == nil {
		f.created++
	}
	return resp, err
}

// TestSyncLostAnswerCopiesOnce: a copy whose answer was lost but which
// landed meanwhile is not copied again by the retry.
func TestSyncLostAnswerCopiesOnce(t *testing.T) {
	a, b := startSite(t), startSite(t)
	put(t, a, "/l/x", data("x", 5000))
	ctx := context.Background()
	s, err := New(ctx, Config{A: a.GRPCAddr(), B: b.GRPCAddr()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lf := &lateFiler{FilerClient: s.b.fc}
	s.b.fc = lf
	d := s.dirs[0]
	se, err := s.a.Lookup(ctx, "/l/x")
	if err != nil || se == nil {
		t.Fatal(se, err)
	}
	if err := d.applyRetrying(ctx, &filerpb.MetadataEvent{Type: filerpb.MetadataEvent_CREATE, NewEntry: se}); err != nil {
		t.Fatal(err)
	}
	if lf.created != 1 {
		t.Errorf("the filer took %d creates of /l/x, want 1 (the copy landed twice)", lf.created)
	}
	if got := d.copies.Load(); got > 1 {
		t.Errorf("%d copies counted", got)
	}
	if string(get(t, b, "/l/x")) != string(data("x", 5000)) {
		t.Error("/l/x on b differs from a's")
	}
}
