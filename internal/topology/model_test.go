package topology

import (
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/replication"
)

// Numbered heartbeats built before the allocation, however many, keep the
// registered copy; the first one built after it decides.
func TestRegisteredVolumeSurvivesNumberedStaleHeartbeats(t *testing.T) {
	topo := New(Options{VolumeSizeLimit: 1 << 30})
	now := time.Unix(1_700_000_000, 0)
	node := NodeInfo{URL: "127.0.0.1:8080", DataCenter: "dc1", Rack: "r1", Disks: []Disk{{MaxVolumes: 8}}, Sequence: 100}
	topo.UpdateNode(node, now)
	if err := topo.RegisterVolume(Volume{ID: 7}, []NewCopy{{URL: node.URL, HeartbeatSequence: 110}}); err != nil {
		t.Fatal(err)
	}
	for seq := uint64(101); seq <= 110; seq++ {
		stale := node
		stale.Sequence = seq
		topo.UpdateNode(stale, now)
		if locs, err := topo.Lookup(7); err != nil || len(locs) != 1 {
			t.Fatalf("after stale heartbeat %d: %v %v", seq, locs, err)
		}
	}
	after := node
	after.Sequence = 111
	topo.UpdateNode(after, now)
	if locs, err := topo.Lookup(7); err == nil && len(locs) > 0 {
		t.Fatalf("volume 7 still located after a heartbeat built after its allocation left it out: %v", locs)
	}
}

// An unnumbered heartbeat sent before an allocation finished must not drop the
// copy the growth just registered; a node that keeps not reporting it wins
// after a few.
func TestRegisteredVolumeSurvivesAStaleHeartbeat(t *testing.T) {
	topo := New(Options{VolumeSizeLimit: 1 << 30})
	now := time.Unix(1_700_000_000, 0)
	node := NodeInfo{URL: "127.0.0.1:8080", DataCenter: "dc1", Rack: "r1", Disks: []Disk{{MaxVolumes: 8}}}
	topo.UpdateNode(node, now)
	if err := topo.RegisterVolume(Volume{ID: 7}, []NewCopy{{URL: node.URL}}); err != nil {
		t.Fatal(err)
	}
	for beat := 1; beat < pendingHeartbeats; beat++ {
		topo.UpdateNode(node, now) // stale: does not list volume 7
		if locs, err := topo.Lookup(7); err != nil || len(locs) != 1 {
			t.Fatalf("after stale heartbeat %d: %v %v", beat, locs, err)
		}
	}
	topo.UpdateNode(node, now)
	if locs, err := topo.Lookup(7); err == nil && len(locs) > 0 {
		t.Fatalf("volume 7 still located after %d heartbeats without it: %v", pendingHeartbeats, locs)
	}

	// Once a heartbeat shows the volume it is no longer pending.
	if err := topo.RegisterVolume(Volume{ID: 8}, []NewCopy{{URL: node.URL}}); err != nil {
		t.Fatal(err)
	}
	withIt := node
	withIt.Disks = []Disk{{MaxVolumes: 8, Volumes: []Volume{{ID: 8}}}}
	topo.UpdateNode(withIt, now)
	if n := topo.nodes[node.URL]; len(n.pending) != 0 {
		t.Fatalf("volume 8 still pending after a heartbeat showed it: %v", n.pending)
	}
}

// An unreachable copy takes every volume with a copy on that server out of
// assigns; a failed write on a reachable server only the one volume.
func TestUnreachableServerTakesAllItsVolumesOut(t *testing.T) {
	topo := New(Options{VolumeSizeLimit: 1 << 30})
	now := time.Unix(1_700_000_000, 0)
	code := replication.Must("001")
	vols := []Volume{{ID: 1, Replication: code}, {ID: 2, Replication: code}, {ID: 3, Replication: code}}
	for _, url := range []string{"10.0.0.1:8080", "10.0.0.2:8080"} {
		topo.UpdateNode(NodeInfo{URL: url, DataCenter: "dc1", Rack: "r1", Disks: []Disk{{MaxVolumes: 8, Volumes: vols}}}, now)
	}
	key := LayoutKey{Replication: code}
	if n := topo.WritableCount(key); n != 3 {
		t.Fatalf("writable before: %d", n)
	}
	if err := topo.ReportFailure(1, "10.0.0.2:8080", "disk full", false, now); err != nil {
		t.Fatal(err)
	}
	if n := topo.WritableCount(key); n != 2 {
		t.Fatalf("after a volume-level failure: %d writable, want 2", n)
	}
	if err := topo.ReportFailure(2, "10.0.0.2:8080", "connection refused", true, now); err != nil {
		t.Fatal(err)
	}
	if n := topo.WritableCount(key); n != 0 {
		t.Fatalf("after the server was unreachable: %d writable, want 0", n)
	}
}
