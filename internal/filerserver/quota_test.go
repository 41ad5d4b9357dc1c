package filerserver

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

func TestGRPCQuota(t *testing.T) {
	s, base := startFake(t, 0)
	conn, err := grpc.NewClient(s.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	g := filerpb.NewFilerClient(conn)
	ctx := context.Background()
	resp, body := do(t, "PUT", base+"/vol/", nil)
	want(t, resp, body, http.StatusCreated)
	if _, err := g.Quota(ctx, &filerpb.QuotaRequest{Path: "/vol"}); status.Code(err) != codes.NotFound {
		t.Fatalf("quota of a directory without one: %v", err)
	}
	q, err := g.Quota(ctx, &filerpb.QuotaRequest{Path: "/vol", Op: filerpb.QuotaRequest_SET, MaxBytes: 4, MaxFiles: 9})
	if err != nil || q.MaxBytes != 4 || q.MaxFiles != 9 {
		t.Fatalf("set: %v %v", q, err)
	}
	resp, body = do(t, "PUT", base+"/vol/a", strings.NewReader("abc"))
	want(t, resp, body, http.StatusCreated)
	_, err = g.CreateEntry(ctx, &filerpb.CreateEntryRequest{Entry: &filerpb.Entry{Path: "/vol/b", Mode: 0o644, Size: 2}})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("create past the quota: %v", err)
	}
	q, err = g.Quota(ctx, &filerpb.QuotaRequest{Path: "/vol"})
	if err != nil || q.UsedBytes != 3 || q.UsedFiles != 1 {
		t.Fatalf("get: %v %v", q, err)
	}
	st, err := g.Statfs(ctx, &filerpb.StatfsRequest{Path: "/vol/sub"})
	if err != nil || !st.Quota || st.TotalBytes != 4 || st.FreeBytes != 1 || st.Files != 1 || st.MaxFiles != 9 {
		t.Fatalf("statfs below the quota: %v %v", st, err)
	}
	if _, err := g.Quota(ctx, &filerpb.QuotaRequest{Path: "/vol", Op: filerpb.QuotaRequest_REMOVE}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Quota(ctx, &filerpb.QuotaRequest{Path: "/", Op: filerpb.QuotaRequest_SET, MaxBytes: 1}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("quota on the root: %v", err)
	}
}
