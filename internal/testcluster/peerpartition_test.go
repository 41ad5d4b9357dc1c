package testcluster_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/testcluster"
	"github.com/kelpfs/kelp/internal/testutil"
	"github.com/kelpfs/kelp/internal/testutil/netcut"
)

// TestVolumeServersPartitionedFromEachOther cuts the link between the two
// copies of every volume (one volume server per data center, replication
// 100) while clients keep writing; masters and clients still reach both
// servers, so nothing but the forwards between them fails. Every write is
// answered, within the forward timeout, either acknowledged or refused:
// under the strict policy every one is refused (a copy cannot be reached);
// under the degraded policy they are acknowledged short of the other copy.
// After the link returns, every acknowledged write is on both copies with
// no command typed, and strict writes succeed again.
func TestVolumeServersPartitionedFromEachOther(t *testing.T) {
	pn := netcut.New()
	c := testcluster.Start(t, testcluster.Options{PulseInterval: 500 * time.Millisecond, PeerNetwork: pn,
		Volumes: []testcluster.VolumeSpec{{DataCenter: "dc1", Rack: "r1", MaxVolumes: 20}, {DataCenter: "dc2", Rack: "r1", MaxVolumes: 20}}})
	m := c.Leader().Addr
	configure(t, m,
		url.Values{"collection": {"deg"}, "replication": {"100"}, "writePolicy": {"degraded"}, "minCopies": {"1"}},
		url.Values{"collection": {"str"}, "replication": {"100"}, "writePolicy": {"strict"}})
	cl, err := client.New(client.Config{Masters: c.MasterAddrs(), MasterWait: time.Second, MaxRetries: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	acked := map[fid.FileID][]byte{}
	var mu sync.Mutex
	put := func(collection string, body []byte) error {
		// A write must be answered well within the forward timeout plus the
		// client's retries; a hang fails the test here, not at its end.
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		id, _, err := cl.PutBytes(wctx, client.AssignRequest{Collection: collection}, body, client.UploadOptions{})
		if wctx.Err() != nil {
			t.Errorf("a %s write was not answered within 30s: %v", collection, err)
		}
		if err == nil {
			mu.Lock()
			acked[id] = body
			mu.Unlock()
		}
		return err
	}
	for i := range 4 {
		for _, col := range []string{"deg", "str"} {
			if err := put(col, []byte(fmt.Sprintf("%s before the cut %d", col, i))); err != nil {
				t.Fatalf("%s write with the link up: %v", col, err)
			}
		}
	}

	c.PartitionVolume(c.Volume[0])
	var strictAcked, degAcked, degRefused int
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 8 {
				col := []string{"deg", "str"}[i%2]
				err := put(col, bytes.Repeat([]byte(fmt.Sprintf("%s during the cut %d/%d;", col, w, i)), 10+i))
				mu.Lock()
				switch {
				case col == "str" && err == nil:
					strictAcked++
				case col == "deg" && err == nil:
					degAcked++
				case col == "deg":
					degRefused++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("during the cut: degraded %d acknowledged, %d refused; strict %d acknowledged", degAcked, degRefused, strictAcked)
	if strictAcked > 0 {
		t.Errorf("%d strict writes were acknowledged while their copies could not reach each other", strictAcked)
	}
	if degAcked == 0 {
		t.Error("no degraded write was acknowledged during the cut")
	}

	c.HealVolumes()
	var why string
	healed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for id, want := range acked {
			locs, err := cl.Lookup(ctx, id.Volume)
			cl.Invalidate(id.Volume)
			if err != nil || len(locs) != 2 {
				why = fmt.Sprintf("volume %d: %d copies listed (%v)", id.Volume, len(locs), err)
				return false
			}
			for _, l := range locs {
				status, got, err := readFrom(l.URL, id)
				if err != nil || status != http.StatusOK || !bytes.Equal(got, want) {
					why = fmt.Sprintf("%s on %s: %d %v", id, l.URL, status, err)
					return false
				}
			}
		}
		return true
	}
	if !testutil.Eventually(60*time.Second, healed) {
		t.Fatalf("acknowledged writes not on both copies within 60s of the heal: %s; %s", why, dump(m))
	}
	testutil.WaitFor(t, 30*time.Second, func() bool { return put("str", []byte("strict after the heal")) == nil },
		"no strict write succeeded within 30s of the heal")
}
