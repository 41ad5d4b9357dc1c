package fuse

import (
	"context"
	"testing"
)

// The context of every request: its cost is paid by each FUSE request.
func BenchmarkUninterrupted(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for b.Loop() {
		_, done := uninterrupted(ctx)
		done()
	}
}

// An interrupt does not cancel a request's context at once.
func TestAnInterruptDoesNotCancelARequestAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	out, done := uninterrupted(ctx)
	defer done()
	cancel()
	if out.Err() != nil {
		t.Fatal("the request's context was cancelled with the interrupt")
	}
	done()
	if out.Err() == nil {
		t.Fatal("done did not end the request's context")
	}
}
