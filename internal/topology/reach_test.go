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

// A node whose heartbeat stream broke counts as unreachable at once: no
// assign names it (under the degraded policy the volume goes on with its
// other copy), a probe that succeeds does not end that, its next heartbeat
// does.
func TestHeartbeatLostNodeIsNotAssigned(t *testing.T) {
	topo := New(Options{Intn: func(n int) int { return n - 1 }})
	code100, _ := replication.Parse("100")
	now := time.Unix(100, 0)
	vol := Volume{ID: 1, Collection: "deg", Replication: code100}
	str := Volume{ID: 2, Collection: "str", Replication: code100}
	a := NodeInfo{URL: "a:1", DataCenter: "dc1", Rack: "r1", Disks: []Disk{{MaxVolumes: 4, Volumes: []Volume{vol, str}}}}
	b := NodeInfo{URL: "b:1", DataCenter: "dc2", Rack: "r1", Disks: []Disk{{MaxVolumes: 4, Volumes: []Volume{vol, str}}}}
	topo.UpdateNode(a, now)
	topo.UpdateNode(b, now)
	// Set once both copies are known: a volume seen with one copy missing
	// gets a deficit the other has to be caught up from.
	topo.SetWritePolicies(map[string]string{"deg": "degraded:1"})
	key := LayoutKey{Collection: "deg", Replication: code100}
	if got, err := topo.PickForAssign(key, ""); err != nil || got.Locations[0].URL != "b:1" {
		t.Fatalf("healthy: %+v, %v; want b:1 first (Intn picks the last)", got, err)
	}

	if !topo.HeartbeatLost("b:1", "connection reset", now) {
		t.Fatal("a broken stream should change the state")
	}
	if topo.HeartbeatLost("b:1", "again", now) {
		t.Error("a second break reported as a change")
	}
	for range 3 {
		got, err := topo.PickForAssign(key, "")
		if err != nil || len(got.Locations) != 1 || got.Locations[0].URL != "a:1" {
			t.Fatalf("assign with b:1's stream broken: %+v, %v; want a:1 alone", got, err)
		}
	}
	if _, err := topo.PickForAssign(key, "dc2"); !errors.Is(err, ErrNoWritableVolume) {
		t.Errorf("assign in dc2 with b:1's stream broken: %v, want ErrNoWritableVolume", err)
	}
	if topo.SetReachable("b:1", true, "", now) {
		t.Error("a successful probe ended a broken stream's mark")
	}
	if got, _ := topo.PickForAssign(key, ""); got.Locations[0].URL != "a:1" {
		t.Errorf("after a probe succeeded: %+v, want a:1", got)
	}
	var st NodeStatus
	for _, n := range topo.Nodes(false) {
		if n.URL == "b:1" {
			st = n
		}
	}
	if st.Reachable || !st.HeartbeatLost || st.ProbeError != "connection reset" {
		t.Errorf("status of b:1 = %+v", st)
	}
	strict := LayoutKey{Collection: "str", Replication: code100}
	if _, err := topo.PickForAssign(strict, ""); !errors.Is(err, ErrNoWritableVolume) {
		t.Errorf("strict assign with b:1's stream broken: %v, want ErrNoWritableVolume", err)
	}
	if why := topo.ExplainUnwritable(strict); !strings.Contains(why, "dc2") || !strings.Contains(why, "heartbeat stream broke") {
		t.Errorf("ExplainUnwritable = %q, want dc2 and the broken stream named", why)
	}
	if _, err := topo.PlanGrowth(code100, 1, PlanOptions{}); !errors.Is(err, ErrNoPlacement) || !strings.Contains(err.Error(), "data center dc2") {
		t.Errorf("growth with b:1's stream broken: %v, want ErrNoPlacement naming dc2", err)
	}

	topo.UpdateNode(b, now.Add(time.Second))
	if got, err := topo.PickForAssign(key, "dc2"); err != nil || got.Locations[0].URL != "b:1" {
		t.Errorf("after b:1 was heard from again: %+v, %v", got, err)
	}
	if len(topo.Unreachable()) != 0 {
		t.Errorf("Unreachable() = %v after the heartbeat", topo.Unreachable())
	}

	topo.HeartbeatLost("b:1", "reset", now)
	topo.ClearHeartbeatLost("b:1")
	if got, err := topo.PickForAssign(key, "dc2"); err != nil || got.Locations[0].URL != "b:1" {
		t.Errorf("after ClearHeartbeatLost: %+v, %v", got, err)
	}
	if topo.HeartbeatLost("nobody:1", "x", now) {
		t.Error("an unknown node changed state")
	}
	// Dropped at the dead timeout, it is still named by a refusal.
	topo.UpdateNode(a, now.Add(20*time.Second))
	if dead := topo.ExpireNodes(now.Add(20*time.Second), 15*time.Second); len(dead) != 1 || dead[0] != "b:1" {
		t.Fatalf("ExpireNodes = %v, want b:1", dead)
	}
	if _, err := topo.PlanGrowth(code100, 1, PlanOptions{}); !errors.Is(err, ErrNoPlacement) || !strings.Contains(err.Error(), "b:1 (data center dc2)") {
		t.Errorf("growth with b:1 dropped: %v, want ErrNoPlacement naming b:1 in dc2", err)
	}
}

// An assign names a copy on a server heard from lately rather than one on a
// server silent for longer than StaleAfter, while the master has not given
// the silent one up; with no fresh copy, any present one will do.
func TestAssignPrefersFreshCopies(t *testing.T) {
	topo := New(Options{Intn: func(n int) int { return n - 1 }, StaleAfter: 2 * time.Second})
	code100, _ := replication.Parse("100")
	now := time.Unix(100, 0)
	vol := Volume{ID: 1, Replication: code100}
	node := func(url, dc string) NodeInfo {
		return NodeInfo{URL: url, DataCenter: dc, Rack: "r1", Disks: []Disk{{MaxVolumes: 4, Volumes: []Volume{vol}}}}
	}
	topo.UpdateNode(node("a:1", "dc1"), now)
	topo.UpdateNode(node("b:1", "dc2"), now)
	key := LayoutKey{Replication: code100}
	if got, _ := topo.PickForAssign(key, ""); got.Locations[0].URL != "b:1" {
		t.Fatalf("both fresh: %+v, want b:1 (Intn picks the last)", got)
	}
	topo.UpdateNode(node("a:1", "dc1"), now.Add(3*time.Second)) // b:1 silent for 3 s
	got, err := topo.PickForAssign(key, "")
	if err != nil || got.Locations[0].URL != "a:1" || len(got.Locations) != 2 {
		t.Errorf("b:1 silent: %+v, %v; want a:1 first, b:1 still a copy", got, err)
	}
	if got, err := topo.PickForAssign(key, "dc2"); err != nil || got.Locations[0].URL != "b:1" {
		t.Errorf("in dc2, where b:1 is the only copy: %+v, %v", got, err)
	}
	topo.UpdateNode(node("b:1", "dc2"), now.Add(4*time.Second))
	if got, _ := topo.PickForAssign(key, ""); got.Locations[0].URL != "b:1" {
		t.Errorf("b:1 heard from again: %+v, want b:1", got)
	}
}
