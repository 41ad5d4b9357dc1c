package filersync

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestRefusedOnlyWhenProvenNotStored: Write deletes the chunks it uploaded
// only when the filer's answer proves the entry was not stored. A cancelled
// call (filer.sync stopped mid-copy) may have been committed: deleting its
// chunks left an entry whose content was gone.
func TestRefusedOnlyWhenProvenNotStored(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{status.Error(codes.InvalidArgument, "bad"), true},
		{status.Error(codes.AlreadyExists, "exists"), true},
		{status.Error(codes.ResourceExhausted, "quota"), true},
		{status.Error(codes.PermissionDenied, "read-only"), true},
		{status.Error(codes.Canceled, "context canceled"), false},
		{status.Error(codes.DeadlineExceeded, "deadline"), false},
		{status.Error(codes.Unavailable, "connection lost"), false},
		{status.Error(codes.Internal, "store failed"), false},
		{context.Canceled, false},
		{errors.New("anything else"), false},
	} {
		if got := refused(c.err); got != c.want {
			t.Errorf("refused(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
