package testcluster_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
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

// TestVolumeServerCutFromMastersOnly cuts one volume server off from the
// master (both ways: its heartbeats and lookups, the master's calls to it)
// while clients and the other volume server still reach it; replication
// 100, one server per data center. The master drops it and says why; every
// file stays readable; strict writes are refused, since the master cannot
// vouch for the copy it lost, and degraded ones are acknowledged on the copy
// it still sees. After the link returns, with no command typed, the server
// is back, every acknowledged write is on both copies, and strict writes
// succeed again.
func TestVolumeServerCutFromMastersOnly(t *testing.T) {
	mn := netcut.New()
	c := testcluster.Start(t, testcluster.Options{PulseInterval: 500 * time.Millisecond, MasterNetwork: mn,
		Volumes: []testcluster.VolumeSpec{{DataCenter: "dc1", Rack: "r1", MaxVolumes: 20}, {DataCenter: "dc2", Rack: "r1", MaxVolumes: 20}}})
	m := c.Leader().Addr
	configure(t, m,
		url.Values{"collection": {"deg"}, "replication": {"100"}, "writePolicy": {"degraded"}, "minCopies": {"1"}},
		url.Values{"collection": {"str"}, "replication": {"100"}, "writePolicy": {"strict"}})
	ctx := context.Background()
	newClient := func() *client.Client {
		cl, err := client.New(client.Config{Masters: c.MasterAddrs(), MasterWait: time.Second, MaxRetries: 2})
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	acked := newAckedWrites(t)
	var mu sync.Mutex // the counts below
	before := newClient()
	for i := range 4 {
		for _, col := range []string{"deg", "str"} {
			if err := acked.put(before, col, []byte(fmt.Sprintf("%s before the cut %d", col, i))); err != nil {
				t.Fatalf("%s write with every link up: %v", col, err)
			}
		}
	}
	beforeCut := acked.snapshot()

	cut := c.Volume[0]
	c.CutFromMasters(cut)
	waitServers(t, m, 1)

	// Every file is readable: through the master's view (the other copy)
	// and from the cut server itself, which clients still reach.
	during := newClient()
	for id, want := range beforeCut {
		got, err := getBytes(ctx, during, id)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s during the cut: %q, %v", id, got, err)
		}
		if status, got, err := readFrom(cut.Addr, id); err != nil || status != http.StatusOK || !bytes.Equal(got, want) {
			t.Errorf("%s from the cut server: %d %q %v", id, status, got, err)
		}
	}

	// Writes from clients that know the cluster only through the master
	// (writers that cached the cut server's address may still reach it,
	// and it forwards to its peer: those are checked with the rest below).
	var strictAcked, degAcked int
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 6 {
				col := []string{"deg", "str"}[i%2]
				err := acked.put(during, col, bytes.Repeat([]byte(fmt.Sprintf("%s during the cut %d/%d;", col, w, i)), 10+i))
				mu.Lock()
				switch {
				case col == "str" && err == nil:
					strictAcked++
				case col == "deg" && err == nil:
					degAcked++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("during the cut: degraded %d acknowledged of 12, strict %d of 12", degAcked, strictAcked)
	if strictAcked > 0 {
		t.Errorf("%d strict writes were acknowledged with a copy the master cannot see", strictAcked)
	}
	if degAcked != 12 {
		t.Errorf("%d of 12 degraded writes acknowledged with one data center's copy in view, want all", degAcked)
	}

	// A writer that still has the cut server's address writes to it: the
	// answer is an acknowledgement (then the write must survive) or a
	// refusal, never a 500.
	for i := range 4 {
		a, err := during.Assign(ctx, client.AssignRequest{Collection: "deg"})
		if err != nil {
			t.Fatal(err)
		}
		body := []byte(fmt.Sprintf("written to the cut server %d", i))
		req, _ := http.NewRequest(http.MethodPut, "http://"+cut.Addr+"/"+a.FID.String(), bytes.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		switch {
		case resp.StatusCode/100 == 2:
			acked.add(a.FID, body)
		case resp.StatusCode >= 500 && resp.StatusCode != http.StatusServiceUnavailable:
			t.Errorf("a write to the cut server answered %s", resp.Status)
		}
		t.Logf("write %d straight to the cut server: %s", i, resp.Status)
	}

	c.HealMasterLinks()
	waitServers(t, m, 2)
	after := newClient()
	var why string
	healed := func() bool { why = acked.missing(after, 2); return why == "" }
	if !testutil.Eventually(60*time.Second, healed) {
		t.Fatalf("acknowledged writes not on both copies within 60s of the heal: %s; %s", why, dump(m))
	}
	testutil.WaitFor(t, 30*time.Second, func() bool { return acked.put(after, "str", []byte("strict after the heal")) == nil },
		"no strict write succeeded within 30s of the heal")
}

func getBytes(ctx context.Context, cl *client.Client, id fid.FileID) ([]byte, error) {
	r, _, err := cl.Get(ctx, id, nil)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}
