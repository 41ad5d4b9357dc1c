package volumeserver_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/testcluster"
)

// TestSignedFileIDsReplicated: with a signing key and a read key, a
// replicated write with assign's token reaches both copies (the primary
// shows its server token to the replica), reads need a read token, a
// delete needs a token, and the internal endpoints refuse a file token.
func TestSignedFileIDsReplicated(t *testing.T) {
	signer, reader := auth.NewSigner("write-key", time.Minute), auth.NewSigner("read-key", time.Minute)
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}, {}}, DefaultReplication: "001",
		Signer: signer, ReadSigner: reader})
	ctx := context.Background()
	plain, err := client.New(client.Config{Masters: c.MasterAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("replicated and signed")
	id, _, err := plain.PutBytes(ctx, client.AssignRequest{}, data, client.UploadOptions{})
	if err != nil {
		t.Fatalf("put with assign's token: %v", err)
	}
	locs, err := plain.Lookup(ctx, id.Volume)
	if err != nil || len(locs) != 2 {
		t.Fatalf("lookup: %v %v", locs, err)
	}
	for _, l := range locs {
		url := "http://" + l.URL + "/" + id.String()
		if r := do(t, "GET", url, nil, nil); r.status != 401 {
			t.Errorf("read from %s without a token: %d", l.URL, r.status)
		}
		r := do(t, "GET", url, nil, map[string]string{"Authorization": "Bearer " + reader.Sign(id, 1)})
		if r.status != 200 || !bytes.Equal(r.body, data) {
			t.Errorf("read from %s with a read token: %d %q", l.URL, r.status, r.body)
		}
		if r := do(t, "GET", url, nil, map[string]string{"Authorization": "Bearer " + signer.Sign(id, 1)}); r.status != 401 {
			t.Errorf("read from %s with a write token: %d", l.URL, r.status)
		}
		sync := fmt.Sprintf("http://%s/sync/index?volume=%d", l.URL, id.Volume)
		if r := do(t, "GET", sync, nil, map[string]string{"Authorization": "Bearer " + signer.Sign(id, 1)}); r.status != 401 {
			t.Errorf("/sync/index with a file token: %d", r.status)
		}
		if r := do(t, "GET", sync, nil, map[string]string{"Authorization": "Bearer " + signer.ServerToken()}); r.status != 200 {
			t.Errorf("/sync/index with the server token: %d %s", r.status, r.body)
		}
	}
	if _, _, err := plain.Get(ctx, id, nil); err == nil {
		t.Error("a client without the read key read")
	}
	if err := plain.Delete(ctx, id); err == nil {
		t.Error("a client without the key deleted")
	}
	// A client without the read key asks the master for a read token
	// (FUSE, WebDAV); this master has no access tokens, so it cannot tell
	// who asks and refuses (the token path: TestReadTokenNeedsIdentity in
	// internal/master, TestSecurityAuth's fsview in test/blackbox).
	viaMaster, err := client.New(client.Config{Masters: c.MasterAddrs(), AccessToken: auth.Static("")})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := viaMaster.Get(ctx, id, nil); err == nil {
		t.Error("an anonymous client got a read token from a master without access tokens")
	}
	keyed, err := client.New(client.Config{Masters: c.MasterAddrs(), Signer: signer, ReadSigner: reader})
	if err != nil {
		t.Fatal(err)
	}
	rc, _, err := keyed.Get(ctx, id, nil)
	if err != nil {
		t.Fatalf("read with the read key: %v", err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, data) {
		t.Errorf("read %q", got)
	}
	if err := keyed.Delete(ctx, id); err != nil {
		t.Fatalf("delete with the key: %v", err)
	}
	for _, l := range locs {
		r := do(t, "GET", "http://"+l.URL+"/"+id.String(), nil, map[string]string{"Authorization": "Bearer " + reader.Sign(id, 1)})
		if r.status != 404 {
			t.Errorf("%s after the delete: %d", l.URL, r.status)
		}
	}
}
