package testcluster_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/testcluster"
	"github.com/kelpfs/kelp/internal/testutil"
	"github.com/kelpfs/kelp/internal/testutil/netcut"
)

// TestPartitionedMasterStopsAssigningMajorityGoesOn cuts the leader's Raft
// links while every process keeps running: the cut-off master stops
// assigning (503), the volume server leaves it for the majority (the cut-off
// master still answers its heartbeats, but knows no leader), the other two
// elect a leader that assigns, no file id is handed out twice, and after the
// partition heals the old leader follows and every master assigns again.
func TestPartitionedMasterStopsAssigningMajorityGoesOn(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Masters: 3, Volumes: []testcluster.VolumeSpec{{}},
		PulseInterval: 500 * time.Millisecond, RaftNetwork: netcut.New()})
	fids := map[string]string{}
	assign := func(m *testcluster.Node) int {
		resp, err := http.Get("http://" + m.Addr + "/dir/assign")
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusOK {
			var a struct{ Fid string }
			if err := json.Unmarshal(b, &a); err != nil || a.Fid == "" {
				t.Fatalf("assign answer %s: %v", b, err)
			}
			if by, dup := fids[a.Fid]; dup {
				t.Fatalf("fid %s handed out twice (by %s and %s)", a.Fid, by, m.Addr)
			}
			fids[a.Fid] = m.Addr
		}
		return resp.StatusCode
	}
	old := c.Leader()
	testutil.WaitFor(t, 20*time.Second, func() bool { return assign(old) == http.StatusOK }, "the leader does not assign")

	c.PartitionMaster(old)
	testutil.WaitFor(t, 20*time.Second, func() bool { return assign(old) == http.StatusServiceUnavailable },
		"the cut-off leader still assigns")
	// Without this the majority assigns only while its mirrored view of
	// the volume server is fresh: an election slower than that left the
	// cluster without assigns until the heal.
	vs := c.Volume[0].VolumeServer()
	testutil.WaitFor(t, 20*time.Second, func() bool { return vs.HeartbeatMaster() != old.Addr },
		"the volume server stays with the cut-off master")
	var lead *testcluster.Node
	testutil.WaitFor(t, 20*time.Second, func() bool {
		for _, m := range c.Masters {
			if m != old && m.Master().IsLeader() && assign(m) == http.StatusOK {
				lead = m
				return true
			}
		}
		return false
	}, "the majority does not assign")
	for range 5 {
		if code := assign(old); code == http.StatusOK {
			t.Fatal("the cut-off master assigned again")
		}
		if code := assign(lead); code != http.StatusOK {
			t.Fatalf("the majority's leader answered %d", code)
		}
	}

	c.HealMasters()
	c.Leader()
	for _, m := range c.Masters {
		testutil.WaitFor(t, 20*time.Second, func() bool { return assign(m) == http.StatusOK }, "a master does not assign after the heal")
	}
}
