package client_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
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

// TestDegradedECReadsGoToOneReconstructor: the holder of a needle's data
// shard is down. Its reads go, after the first, to one live holder, the
// same every time (its cache of rebuilt windows then serves them), the one
// holding the most shards, whatever the lookup order.
func TestDegradedECReadsGoToOneReconstructor(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Servers: 2, Volumes: 1, Replicas: 2})
	c := newClient(t, client.Config{Masters: []string{cl.Master.URL}})
	ctx := context.Background()
	id, _, err := c.PutBytes(ctx, client.AssignRequest{}, []byte("hello"), client.UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dead := deadAddr(t)
	few, most := cl.Servers[0], cl.Servers[1]
	cl.Master.SetHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/dir/lookup" {
			return false
		}
		// The dead server holds shards 0-3 (the needle's data shard is 0),
		// "few" 10-13, "most" 4-9; "few" is listed first.
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"volumeId":"%d","locations":[{"url":%q,"publicUrl":%q,"ecShards":%d},{"url":%q,"publicUrl":%q,"ecShards":%d},{"url":%q,"publicUrl":%q,"ecShards":%d}]}`,
			id.Volume, dead, dead, 0xF, few.URL, few.URL, 0xF<<10, most.URL, most.URL, 0x3F<<4)
		return true
	})
	var reads [2]atomic.Int64
	for i, s := range []*clienttest.VolumeServer{few, most} {
		s.SetHook(func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path == "/ec/routes" {
				var b [9]byte
				binary.BigEndian.PutUint64(b[:], 1) // keys from 1 start in data shard 0
				w.Write(b[:])
				return true
			}
			w.Header().Set(client.HeaderEC, "1")
			if r.Method == http.MethodGet {
				reads[i].Add(1)
			}
			return false
		})
	}
	for range 10 {
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
	if f, m := reads[0].Load(), reads[1].Load(); f > 1 || m < 9 {
		t.Fatalf("reads: %d on the holder of 4 shards listed first, %d on the holder of 6; want all but the first on the latter", f, m)
	}
}
