package volumeserver_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/pb/volumepb"
	"github.com/kelpfs/kelp/internal/store"
	"github.com/kelpfs/kelp/internal/volumeserver"
)

// TestAdminAPIAuth: with file ids signed, the volume server's admin gRPC
// API refuses calls without credentials, with a forged server token and
// with a file token (Unauthenticated, nothing allocated); it takes the
// server token and read-write access tokens, and a read-only token only
// for status. The master's own calls carry the server token: the signed
// clusters of TestSignedFileIDsReplicated grow volumes through it.
func TestAdminAPIAuth(t *testing.T) {
	signer := auth.NewSigner("admin-api-key", time.Minute)
	access, err := auth.NewAccess("", signer)
	if err != nil {
		t.Fatal(err)
	}
	rw, ro := auth.NewToken(), auth.NewToken()
	access.Add(rw, "alice", auth.RoleWrite)
	access.Add(ro, "bob", auth.RoleRead)
	v, err := volumeserver.New(volumeserver.Config{IP: "127.0.0.1", Disks: []store.DiskConfig{{Dir: t.TempDir(), MaxVolumes: 8}},
		Signer: signer, Access: access})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { v.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); v.Close(); <-done })
	cc, err := grpc.NewClient(v.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	admin := volumepb.NewVolumeServerClient(cc)
	with := func(tok string) grpc.CallOption { return grpc.PerRPCCredsCallOption{Creds: bearer(tok)} }
	call, cancelCall := context.WithTimeout(ctx, 30*time.Second)
	defer cancelCall()

	forged := auth.NewSigner("another-key", time.Minute).ServerToken()
	fileTok := signer.Sign(fid.FileID{Volume: 7, Key: 1, Cookie: 1}, 1)
	for name, opts := range map[string][]grpc.CallOption{"no credentials": {grpc.WaitForReady(true)},
		"a forged server token": {with(forged)}, "a file token": {with(fileTok)}, "an unknown token": {with(auth.NewToken())}} {
		_, err := admin.AllocateVolume(call, &volumepb.AllocateVolumeRequest{VolumeId: 7}, opts...)
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("AllocateVolume with %s: %v, want Unauthenticated", name, err)
		}
		_, err = admin.VolumeStatus(call, &volumepb.VolumeStatusRequest{VolumeId: 7}, opts...)
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("VolumeStatus with %s: %v, want Unauthenticated", name, err)
		}
	}
	if _, err := admin.AllocateVolume(call, &volumepb.AllocateVolumeRequest{VolumeId: 7}, with(ro)); status.Code(err) != codes.PermissionDenied {
		t.Errorf("AllocateVolume with a read-only token: %v, want PermissionDenied", err)
	}
	if _, ok := v.Store().Volume(7); ok {
		t.Fatal("refused calls allocated volume 7")
	}
	if _, err := admin.AllocateVolume(call, &volumepb.AllocateVolumeRequest{VolumeId: 7}, with(signer.ServerToken())); err != nil {
		t.Fatalf("AllocateVolume with the server token: %v", err)
	}
	if _, err := admin.VolumeStatus(call, &volumepb.VolumeStatusRequest{VolumeId: 7}, with(ro)); err != nil {
		t.Errorf("VolumeStatus with a read-only token: %v", err)
	}
	if _, err := admin.AllocateVolume(call, &volumepb.AllocateVolumeRequest{VolumeId: 8}, with(rw)); err != nil {
		t.Errorf("AllocateVolume with a read-write token: %v", err)
	}
}

// bearer sends "authorization: Bearer tok" over a plain connection.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }
