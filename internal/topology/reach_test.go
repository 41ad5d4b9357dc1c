package topology

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/replication"
)

// A node that heartbeats but cannot be reached counts as missing for its
// volumes, is never a growth target, and shows as unreachable, until a probe
// succeeds again.
func TestUnreachableNodeCountsAsMissing(t *testing.T) {
	topo := New(Options{VolumeSizeLimit: 1000, Intn: func(int) int { return 0 }})
	code100, _ := replication.Parse("100")
	now := time.Unix(100, 0)
	vol := Volume{ID: 1, Replication: code100}
	topo.UpdateNode(NodeInfo{URL: "a:1", DataCenter: "dc1", Rack: "r1", Disks: []Disk{{MaxVolumes: 4, Volumes: []Volume{vol}}}}, now)
	topo.UpdateNode(NodeInfo{URL: "b:1", DataCenter: "dc2", Rack: "r1", Disks: []Disk{{MaxVolumes: 4, Volumes: []Volume{vol}}}}, now)
	key := LayoutKey{Replication: code100}
	if _, err := topo.PickForAssign(key, ""); err != nil {
		t.Fatalf("healthy: %v", err)
	}

	if !topo.SetReachable("b:1", false, "dial: connection refused", now) {
		t.Fatal("first failure should change the state")
	}
	if topo.SetReachable("b:1", false, "still refused", now.Add(time.Second)) {
		t.Error("second failure reported as a change")
	}
	// Heartbeats go on; they do not make the node reachable.
	topo.UpdateNode(NodeInfo{URL: "b:1", DataCenter: "dc2", Rack: "r1", Disks: []Disk{{MaxVolumes: 4, Volumes: []Volume{vol}}}}, now.Add(2*time.Second))
	if _, err := topo.PickForAssign(key, ""); !errors.Is(err, ErrNoWritableVolume) {
		t.Errorf("assign with an unreachable copy: %v, want ErrNoWritableVolume", err)
	}
	_, err := topo.PlanGrowth(code100, 1, PlanOptions{})
	if !errors.Is(err, ErrNoPlacement) || !strings.Contains(err.Error(), "b:1") {
		t.Errorf("growth with dc2 unreachable: %v, want ErrNoPlacement naming b:1", err)
	}
	if n := topo.DisksWithRoom(""); n != 1 {
		t.Errorf("DisksWithRoom = %d, want 1", n)
	}
	locs, err := topo.Lookup(1)
	if err != nil || len(locs) != 2 || locs[0].URL != "a:1" || locs[1].URL != "b:1" {
		t.Errorf("lookup with b:1 unreachable = %+v, %v; want a:1 first", locs, err)
	}
	var b NodeStatus
	for _, n := range topo.Nodes(false) {
		if n.URL == "b:1" {
			b = n
		}
	}
	if b.Reachable || b.ProbeError != "still refused" || !b.UnreachableSince.Equal(now) {
		t.Errorf("status of b:1 = %+v", b)
	}
	if got := topo.Unreachable(); len(got) != 1 || got[0] != "b:1" {
		t.Errorf("Unreachable() = %v", got)
	}

	if !topo.SetReachable("b:1", true, "", now.Add(3*time.Second)) {
		t.Fatal("recovery should change the state")
	}
	if _, err := topo.PickForAssign(key, ""); err != nil {
		t.Errorf("after recovery: %v", err)
	}
	if _, err := topo.PlanGrowth(code100, 1, PlanOptions{}); err != nil {
		t.Errorf("growth after recovery: %v", err)
	}
	topo.SetReachable("a:1", false, "refused", now)
	if locs, _ := topo.Lookup(1); len(locs) != 2 || locs[0].URL != "b:1" {
		t.Errorf("lookup with a:1 unreachable = %+v, want b:1 first", locs)
	}
	if topo.SetReachable("nobody:1", false, "x", now) {
		t.Error("an unknown node changed state")
	}
}

// A node that is dropped and comes back is probed afresh.
func TestUnreachableMarkGoesWithTheNode(t *testing.T) {
	topo := New(Options{})
	now := time.Unix(100, 0)
	topo.UpdateNode(NodeInfo{URL: "a:1"}, now)
	topo.SetReachable("a:1", false, "refused", now)
	topo.RemoveNode("a:1")
	topo.UpdateNode(NodeInfo{URL: "a:1"}, now)
	if got := topo.Unreachable(); len(got) != 0 {
		t.Errorf("Unreachable() = %v after the node came back", got)
	}
}
