package testcluster_test

import (
	"bytes"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/client"
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
	acked := newAckedWrites(t)
	put := func(collection string, body []byte) error { return acked.put(cl, collection, body) }
	for i := range 4 {
		for _, col := range []string{"deg", "str"} {
			if err := put(col, []byte(fmt.Sprintf("%s before the cut %d", col, i))); err != nil {
				t.Fatalf("%s write with the link up: %v", col, err)
			}
		}
	}

	c.PartitionVolume(c.Volume[0])
	var strictAcked, degAcked, degRefused int
	var mu sync.Mutex
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
	healed := func() bool { why = acked.missing(cl, 2); return why == "" }
	if !testutil.Eventually(60*time.Second, healed) {
		t.Fatalf("acknowledged writes not on both copies within 60s of the heal: %s; %s", why, dump(m))
	}
	testutil.WaitFor(t, 30*time.Second, func() bool { return put("str", []byte("strict after the heal")) == nil },
		"no strict write succeeded within 30s of the heal")
}
