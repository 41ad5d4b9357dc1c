package topology

import (
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/replication"
)

func TestParseWritePolicy(t *testing.T) {
	for _, c := range []struct {
		in   string
		min  int
		want string
		bad  bool
	}{
		{"strict", 0, "strict", false}, {"", 0, "strict", false}, {"degraded", 0, "degraded:1", false},
		{"degraded", 2, "degraded:2", false}, {"degraded:3", 0, "degraded:3", false},
		{"strict", 1, "", true}, {"degraded:0", 0, "", true}, {"loose", 0, "", true}, {"degraded", -1, "", true},
	} {
		p, err := ParseWritePolicy(c.in, c.min)
		if (err != nil) != c.bad || (err == nil && p.String() != c.want) {
			t.Errorf("ParseWritePolicy(%q, %d) = %v, %v; want %q (error %v)", c.in, c.min, p, err, c.want, c.bad)
		}
	}
}

// TestDegradedVolumeHealsOnlyThroughCatchUp: under the degraded policy a
// volume that lost a copy stays writable on the other; the copy that comes
// back is behind (not a write target, read last) until a catch-up pass finds
// nothing left to copy; under strict the same volume is not writable.
func TestDegradedVolumeHealsOnlyThroughCatchUp(t *testing.T) {
	topo := New(Options{VolumeSizeLimit: 1 << 30})
	now := time.Unix(1_700_000_000, 0)
	code := replication.Must("100")
	key := LayoutKey{Collection: "deg", Replication: code}
	vol := Volume{ID: 1, Collection: "deg", Replication: code}
	a := NodeInfo{URL: "10.0.0.1:8080", DataCenter: "dc1", Disks: []Disk{{MaxVolumes: 8, Volumes: []Volume{vol}}}}
	b := NodeInfo{URL: "10.0.0.2:8080", DataCenter: "dc2", Disks: []Disk{{MaxVolumes: 8, Volumes: []Volume{vol}}}}
	topo.UpdateNode(a, now)
	topo.UpdateNode(b, now)
	topo.RemoveNode(b.URL)
	if n := topo.WritableCount(key); n != 0 {
		t.Fatalf("strict: %d writable with a copy lost, want 0", n)
	}
	topo.SetWritePolicies(map[string]string{"deg": "degraded:1"})
	if n := topo.WritableCount(key); n != 1 {
		t.Fatalf("degraded: %d writable with a copy lost, want 1", n)
	}
	if m := topo.VolumeMinCopies(1); m != 1 {
		t.Fatalf("VolumeMinCopies = %d, want 1", m)
	}
	ds := topo.Deficits()
	if len(ds) != 1 || ds[0].Missing != 1 || len(ds[0].Good) != 1 || ds[0].Good[0] != a.URL {
		t.Fatalf("deficits after the loss: %+v", ds)
	}
	topo.UpdateNode(b, now.Add(time.Second)) // back, behind
	ds = topo.Deficits()
	if len(ds) != 1 || len(ds[0].Behind) != 1 || ds[0].Behind[0].URL != b.URL {
		t.Fatalf("deficits after the return: %+v", ds)
	}
	for range 5 {
		as, err := topo.PickForAssign(key, "")
		if err != nil || as.Locations[0].URL != a.URL {
			t.Fatalf("assign while b is behind: %+v %v; want a first", as, err)
		}
	}
	if locs, _ := topo.Lookup(1); locs[0].URL != a.URL {
		t.Fatalf("lookup while b is behind: %+v; want a first", locs)
	}
	if topo.CaughtUp(1, b.URL, 3, nil, now) {
		t.Fatal("a pass that copied needles made the copy good")
	}
	if !topo.CaughtUp(1, b.URL, 0, nil, now) || len(topo.Deficits()) != 0 {
		t.Fatalf("after a pass with nothing to copy: %+v", topo.Deficits())
	}
	// A write that reached only a: b is behind again.
	if err := topo.ReportDegradedWrite(1, []string{a.URL}, now); err != nil {
		t.Fatal(err)
	}
	if ds := topo.Deficits(); len(ds) != 1 || len(ds[0].Behind) != 1 {
		t.Fatalf("after a write short of copies: %+v", ds)
	}
}

// TestReconfiguredVolumeMovesLayout: a code changed on live servers moves the
// volume to its new layout with the first heartbeat that shows it.
func TestReconfiguredVolumeMovesLayout(t *testing.T) {
	topo := New(Options{VolumeSizeLimit: 1 << 30})
	now := time.Unix(1_700_000_000, 0)
	old, neu := replication.Must("001"), replication.Must("000")
	for _, url := range []string{"10.0.0.1:8080", "10.0.0.2:8080"} {
		topo.UpdateNode(NodeInfo{URL: url, Disks: []Disk{{MaxVolumes: 8, Volumes: []Volume{{ID: 1, Replication: old}}}}}, now)
	}
	topo.UpdateNode(NodeInfo{URL: "10.0.0.1:8080", Disks: []Disk{{MaxVolumes: 8, Volumes: []Volume{{ID: 1, Replication: neu}}}}}, now)
	if n := topo.WritableCount(LayoutKey{Replication: neu}); n != 1 {
		t.Fatalf("new layout: %d writable, want 1", n)
	}
	if n := topo.WritableCount(LayoutKey{Replication: old}); n != 0 {
		t.Fatalf("old layout: %d writable, want 0", n)
	}
}
