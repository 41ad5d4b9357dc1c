package filerserver

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/chunk/chunktest"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// TestSubscribeMetadataNeedsToken: with encryption at rest on, metadata
// events and listings carry every chunk's key, so with access tokens
// configured an anonymous or unknown-token SubscribeMetadata (and
// ListEntries, LookupEntry) is refused with Unauthenticated before any
// event is sent, while a read-only token subscribes and sees a write's
// event with its chunk key.
func TestSubscribeMetadataNeedsToken(t *testing.T) {
	access, err := auth.NewAccess("", auth.NewSigner("filer-sub-key", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ro, rw := auth.NewToken(), auth.NewToken()
	access.Add(ro, "watcher", auth.RoleRead)
	access.Add(rw, "writer", auth.RoleWrite)
	s, err := New(Config{Dir: t.TempDir(), Blobs: chunktest.New(), EncryptData: true, Access: access, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	conn, err := grpc.NewClient(s.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	g := filerpb.NewFilerClient(conn)
	with := func(tok string) grpc.CallOption { return grpc.PerRPCCredsCallOption{Creds: bearerCreds(tok)} }

	for name, opts := range map[string][]grpc.CallOption{"no token": {grpc.WaitForReady(true)}, "an unknown token": {with(auth.NewToken())}} {
		sub, err := g.SubscribeMetadata(ctx, &filerpb.SubscribeMetadataRequest{}, opts...)
		if err == nil {
			_, err = sub.Recv()
		}
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("SubscribeMetadata with %s: %v, want Unauthenticated", name, err)
		}
		ls, err := g.ListEntries(ctx, &filerpb.ListEntriesRequest{Dir: "/"}, opts...)
		if err == nil {
			_, err = ls.Recv()
		}
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("ListEntries with %s: %v, want Unauthenticated", name, err)
		}
	}

	sub, err := g.SubscribeMetadata(ctx, &filerpb.SubscribeMetadataRequest{}, with(ro))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("PUT", "http://"+s.Addr()+"/secret/plan.txt", bytes.NewReader([]byte("sealed at rest")))
	req.Header.Set("Authorization", "Bearer "+rw)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("PUT with a read-write token: %d", resp.StatusCode)
	}
	for {
		ev, err := sub.Recv()
		if err != nil {
			t.Fatalf("SubscribeMetadata with a read-only token: %v", err)
		}
		if e := ev.GetNewEntry(); e != nil && e.Path == "/secret/plan.txt" {
			if len(e.Chunks) == 0 || len(e.Chunks[0].CipherKey) != 32 {
				t.Errorf("the event's entry has no chunk key: %v", e.Chunks)
			}
			break
		}
	}
}

// bearerCreds sends "authorization: Bearer tok" over a plain connection.
type bearerCreds string

func (b bearerCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearerCreds) RequireTransportSecurity() bool { return false }
