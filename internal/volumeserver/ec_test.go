package volumeserver_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/erasure"
	"github.com/kelpfs/kelp/internal/testcluster"
)

// TestECEndpoints encodes a volume on its one server (4+2, every shard
// local), drops the original, and checks reads and deletes through the EC
// path and the answers of the shard endpoints to bad requests.
func TestECEndpoints(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}}})
	cl, err := client.New(client.Config{Masters: c.MasterAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	files := map[string][]byte{}
	var vid uint32
	var first string
	for i := range 20 {
		data := bytes.Repeat([]byte{byte(i)}, 1000+i*300)
		id, _, err := cl.PutBytes(ctx, client.AssignRequest{Collection: "e"}, data, client.UploadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if vid == 0 {
			vid, first = id.Volume, id.String()
		}
		if id.Volume == vid {
			files[id.String()] = data
		}
	}
	vs := c.Volume[0].VolumeServer()
	st := vs.Store()
	if err := st.EcEncode(ctx, vid, erasure.Scheme{Data: 4, Parity: 2}, nil); err == nil {
		t.Fatal("encoded a writable volume")
	}
	if err := st.MarkReadOnly(vid, true); err != nil {
		t.Fatal(err)
	}
	if err := st.EcEncode(ctx, vid, erasure.Scheme{Data: 4, Parity: 2}, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(vid); err != nil {
		t.Fatal(err)
	}
	base := "http://" + vs.URL()
	for id, want := range files {
		r := do(t, "GET", base+"/"+id, nil, nil)
		if r.status != 200 || !bytes.Equal(r.body, want) {
			t.Fatalf("EC read of %s: %d, %d bytes", id, r.status, len(r.body))
		}
	}
	r := do(t, "GET", base+"/"+first, nil, map[string]string{"Range": "bytes=10-19"})
	if r.status != http.StatusPartialContent || !bytes.Equal(r.body, files[first][10:20]) {
		t.Fatalf("EC range read: %d %q", r.status, r.body)
	}
	if r := do(t, "DELETE", base+"/"+first, nil, nil); r.status != http.StatusAccepted {
		t.Fatalf("EC delete: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", base+"/"+first, nil, nil); r.status != http.StatusNotFound {
		t.Fatalf("read after EC delete: %d", r.status)
	}
	if r := do(t, "GET", base+"/ec/routes?volume="+fmt.Sprint(vid), nil, nil); r.status != 200 || len(r.body) == 0 || len(r.body)%erasure.RouteSize != 0 {
		t.Fatalf("routes: %d %d bytes", r.status, len(r.body))
	}
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/ec/shard?volume=abc&shard=0&offset=0&size=1", 400},
		{"/ec/shard?volume=99999&shard=0&offset=0&size=1", 404},
		{fmt.Sprintf("/ec/shard?volume=%d&shard=9&offset=0&size=1", vid), 404},
		{fmt.Sprintf("/ec/shard?volume=%d&shard=0&offset=0&size=999999999", vid), 400},
		{fmt.Sprintf("/ec/shard?volume=%d&shard=0&offset=1099511627776&size=10", vid), 400},
		{fmt.Sprintf("/ec/shard?volume=%d&shard=0&offset=1&size=10&verify=1", vid), 400},
		{fmt.Sprintf("/ec/shard?volume=%d&shard=0&offset=0&size=4096&verify=1", vid), 200},
		{fmt.Sprintf("/ec/shards?volume=%d&shards=0,x&offset=0&size=4096", vid), 400},
		{fmt.Sprintf("/ec/shards?volume=%d&shards=0,1&offset=5&size=4096", vid), 400},
		{fmt.Sprintf("/ec/shards?volume=%d&shards=0,5&offset=0&size=4096", vid), 200},
		{"/ec/routes?volume=-1", 400},
	} {
		if r := do(t, "GET", base+tc.path, nil, nil); r.status != tc.want {
			t.Errorf("GET %s: %d %s, want %d", tc.path, r.status, r.body, tc.want)
		}
	}
}
