package topology

import (
	"slices"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/replication"
)

// TestAdoptedDeficitWaitsForItsGoodCopy: a master that adopts its
// predecessor's records before any volume server reported (a restart of
// every master) does not take the behind copy for good when it reports
// first: the volume waits, unwritable, for its good copy, and the behind
// one is then caught up from it.
func TestAdoptedDeficitWaitsForItsGoodCopy(t *testing.T) {
	topo := New(Options{VolumeSizeLimit: 1 << 30})
	topo.SetWritePolicies(map[string]string{"deg": "degraded:1"})
	now := time.Unix(1_700_000_000, 0)
	code := replication.Must("100")
	key := LayoutKey{Collection: "deg", Replication: code}
	vol := Volume{ID: 1, Collection: "deg", Replication: code}
	a := NodeInfo{URL: "10.0.0.1:8080", DataCenter: "dc1", Disks: []Disk{{MaxVolumes: 8, Volumes: []Volume{vol}}}}
	b := NodeInfo{URL: "10.0.0.2:8080", DataCenter: "dc2", Disks: []Disk{{MaxVolumes: 8, Volumes: []Volume{vol}}}}
	rec := DeficitRecord{Since: now, Cause: "a write reached only " + a.URL, Good: []string{a.URL}}
	topo.AdoptDeficits(map[uint32]DeficitRecord{1: rec})

	topo.UpdateNode(b, now) // the behind copy reports first
	ds := topo.Deficits()
	if len(ds) != 1 || !ds[0].Waiting || !slices.Equal(ds[0].Good, []string{a.URL}) {
		t.Fatalf("deficits with only the behind copy reported: %+v", ds)
	}
	if n := topo.WritableCount(key); n != 0 {
		t.Fatalf("%d writable with only the behind copy reported, want 0", n)
	}
	if got := topo.DeficitRecords()[1]; !slices.Equal(got.Good, rec.Good) || !got.Since.Equal(now) {
		t.Fatalf("record while waiting: %+v", got)
	}

	topo.UpdateNode(a, now)
	ds = topo.Deficits()
	if len(ds) != 1 || ds[0].Waiting || len(ds[0].Behind) != 1 || ds[0].Behind[0].URL != b.URL {
		t.Fatalf("deficits with both copies reported: %+v", ds)
	}
	if as, err := topo.PickForAssign(key, ""); err != nil || as.Locations[0].URL != a.URL {
		t.Fatalf("assign with b behind: %+v %v; want a first", as, err)
	}
	if !topo.CaughtUp(1, b.URL, 0, nil, now) || len(topo.DeficitRecords()) != 0 {
		t.Fatalf("after b caught up: %+v", topo.DeficitRecords())
	}
}

// TestAdoptReplacesOwnDeficits: records adopted replace what this master
// derived from its own view; a volume short of a copy gets its deficit back.
func TestAdoptReplacesOwnDeficits(t *testing.T) {
	topo := New(Options{VolumeSizeLimit: 1 << 30})
	topo.SetWritePolicies(map[string]string{"deg": "degraded:1"})
	now := time.Unix(1_700_000_000, 0)
	code := replication.Must("100")
	v1 := Volume{ID: 1, Collection: "deg", Replication: code}
	v2 := Volume{ID: 2, Collection: "deg", Replication: code}
	a := NodeInfo{URL: "10.0.0.1:8080", DataCenter: "dc1", Disks: []Disk{{MaxVolumes: 8, Volumes: []Volume{v1, v2}}}}
	b := NodeInfo{URL: "10.0.0.2:8080", DataCenter: "dc2", Disks: []Disk{{MaxVolumes: 8, Volumes: []Volume{v1}}}}
	topo.UpdateNode(a, now)
	topo.UpdateNode(b, now)
	topo.CaughtUp(1, b.URL, 0, nil, now) // volume 1 was short until b reported
	if got := topo.DeficitRecords(); len(got) != 1 || got[2].Good[0] != a.URL {
		t.Fatalf("own deficits: %+v", got) // volume 2 lacks its dc2 copy
	}
	// The predecessor knew that b missed writes of volume 1.
	topo.AdoptDeficits(map[uint32]DeficitRecord{1: {Since: now, Good: []string{a.URL}}})
	got := topo.DeficitRecords()
	if len(got) != 2 || !slices.Equal(got[1].Good, []string{a.URL}) || !slices.Equal(got[2].Good, []string{a.URL}) {
		t.Fatalf("deficits after adopting: %+v", got)
	}
	if ds := topo.Deficits(); len(ds[0].Behind) != 1 || ds[0].Behind[0].URL != b.URL || ds[0].Waiting {
		t.Fatalf("volume 1 after adopting: %+v", ds[0])
	}
}
