package client_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/client/clienttest"
)

// TestReadFromVolumeTurnedECRefreshesLocations: locations cached while a
// volume was a normal one still reach a server that holds some of its
// shards after ec.encode, which answers (possibly fetching the needle from
// the data shard's holder: an extra hop on every read). Its answer says the
// volume is erasure-coded now, so the client asks the master again, and the
// next reads go straight to the holder of each needle's data shard.
func TestReadFromVolumeTurnedECRefreshesLocations(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Servers: 1, Volumes: 1})
	c := newClient(t, client.Config{Masters: []string{cl.Master.URL}})
	ctx := context.Background()
	id, _, err := c.PutBytes(ctx, client.AssignRequest{}, []byte("hello"), client.UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	read := func() {
		t.Helper()
		rc, _, err := c.Get(ctx, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if string(b) != "hello" {
			t.Fatalf("read %q", b)
		}
	}
	read()
	before := cl.Master.Lookups.Load()
	read() // cached locations
	if got := cl.Master.Lookups.Load(); got != before {
		t.Fatalf("a read with cached locations asked the master (%d lookups, want %d)", got, before)
	}
	// The volume is erasure-coded now. The fake master's answer has no
	// shard bits (a master slow to learn of the shards): the refresh is not
	// repeated on every read, at most once per ecRefreshEvery.
	cl.Servers[0].SetHook(func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set(client.HeaderEC, "1")
		return false
	})
	read()
	read()
	read()
	if got := cl.Master.Lookups.Load(); got != before+1 {
		t.Fatalf("%d lookups after reads answered from an EC volume, want %d (one refresh)", got, before+1)
	}
}
