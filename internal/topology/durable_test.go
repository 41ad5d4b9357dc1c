package topology

import (
	"errors"
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

// twoCopies is a degraded collection "deg" with replication 100 and one
// volume whose copies live on a (dc1) and b (dc2).
func twoCopies() (*Topology, LayoutKey, Volume, NodeInfo, NodeInfo) {
	topo := New(Options{VolumeSizeLimit: 1 << 30})
	topo.SetWritePolicies(map[string]string{"deg": "degraded:1"})
	code := replication.Must("100")
	vol := Volume{ID: 1, Collection: "deg", Replication: code}
	a := NodeInfo{URL: "10.0.0.1:8080", DataCenter: "dc1", Disks: []Disk{{MaxVolumes: 8, Volumes: []Volume{vol}}}}
	b := NodeInfo{URL: "10.0.0.2:8080", DataCenter: "dc2", Disks: []Disk{{MaxVolumes: 8, Volumes: []Volume{vol}}}}
	return topo, LayoutKey{Collection: "deg", Replication: code}, vol, a, b
}

// TestLostGoodCopyIsWaitedFor: when the only copy known to hold every
// acknowledged write is lost while a behind copy stays, the behind copy is
// not taken for good (it would serve reads without the write, and the good
// copy's return would be healed from it): the volume waits, unwritable,
// for the good copy. Only AdoptPresentCopies, after its delay, gives up.
func TestLostGoodCopyIsWaitedFor(t *testing.T) {
	topo, key, _, a, b := twoCopies()
	now := time.Unix(1_700_000_000, 0)
	topo.UpdateNode(a, now)
	topo.UpdateNode(b, now)
	if err := topo.ReportDegradedWrite(1, []string{a.URL}, now); err != nil {
		t.Fatal(err)
	}
	topo.RemoveNode(a.URL)
	ds := topo.Deficits()
	if len(ds) != 1 || !ds[0].Waiting || !slices.Equal(ds[0].Good, []string{a.URL}) {
		t.Fatalf("deficits with the good copy lost: %+v", ds)
	}
	if n := topo.WritableCount(key); n != 0 {
		t.Fatalf("%d writable with only the behind copy present, want 0", n)
	}
	if got := topo.DeficitRecords()[1]; !slices.Equal(got.Good, []string{a.URL}) {
		t.Fatalf("record with the good copy lost: %+v", got)
	}
	if locs, _ := topo.Lookup(1); len(locs) != 1 || locs[0].URL != b.URL {
		t.Fatalf("lookup: %+v", locs)
	}
	if topo.CaughtUp(1, b.URL, 0, nil, now) {
		t.Fatal("the behind copy became good while the good copy was away")
	}
	if got := topo.AdoptPresentCopies(time.Now(), time.Hour); len(got) != 0 {
		t.Fatalf("adopted %v before the delay", got)
	}
	topo.UpdateNode(a, now.Add(time.Second))
	ds = topo.Deficits()
	if len(ds) != 1 || ds[0].Waiting || len(ds[0].Behind) != 1 || ds[0].Behind[0].URL != b.URL {
		t.Fatalf("deficits after the good copy returned: %+v", ds)
	}
	if n := topo.WritableCount(key); n != 1 {
		t.Fatalf("%d writable with the good copy back, want 1", n)
	}

	// Lost for good: after the delay the present copy is adopted.
	topo.RemoveNode(a.URL)
	if got := topo.AdoptPresentCopies(time.Now().Add(2*time.Hour), time.Hour); !slices.Equal(got, []uint32{1}) {
		t.Fatalf("adopted %v after the delay, want [1]", got)
	}
	ds = topo.Deficits()
	if len(ds) != 1 || ds[0].Waiting || !slices.Equal(ds[0].Good, []string{b.URL}) || ds[0].Missing != 1 {
		t.Fatalf("deficits after adopting: %+v", ds)
	}
	if n := topo.WritableCount(key); n != 1 {
		t.Fatalf("%d writable after adopting, want 1", n)
	}
}

// TestRegisterEndsPresenceDeficit: a fresh volume whose dc2 copy's
// heartbeat showed it before growth registered both copies is not
// under-replicated: no copy of an empty volume missed a write. (Left
// standing, the dc2 copy was its only good one, and a later write reported
// on dc1 alone kept it so.)
func TestRegisterEndsPresenceDeficit(t *testing.T) {
	topo, _, vol, a, b := twoCopies()
	now := time.Unix(1_700_000_000, 0)
	empty := a
	empty.Disks = []Disk{{MaxVolumes: 8}}
	topo.UpdateNode(empty, now)
	topo.UpdateNode(b, now) // the new volume on b, before the registration
	if ds := topo.Deficits(); len(ds) != 1 {
		t.Fatalf("deficits before the registration: %+v", ds)
	}
	if err := topo.RegisterVolume(vol, []NewCopy{{URL: a.URL}, {URL: b.URL}}); err != nil {
		t.Fatal(err)
	}
	if ds := topo.Deficits(); len(ds) != 0 {
		t.Fatalf("deficits after the registration: %+v", ds)
	}
	if err := topo.ReportDegradedWrite(1, []string{a.URL}, now); err != nil {
		t.Fatal(err)
	}
	if ds := topo.Deficits(); len(ds) != 1 || !slices.Equal(ds[0].Good, []string{a.URL}) {
		t.Fatalf("deficits after a write reached only a: %+v", ds)
	}
}

// TestStaleCatchUpMakesNoCopyGood: a catch-up pass that began before a
// write the copy missed was reported may have compared against the good
// copy before it held that write: it does not make the copy good.
func TestStaleCatchUpMakesNoCopyGood(t *testing.T) {
	topo, _, _, a, b := twoCopies()
	now := time.Unix(1_700_000_000, 0)
	topo.UpdateNode(a, now)
	topo.UpdateNode(b, now)
	if err := topo.ReportDegradedWrite(1, []string{a.URL}, now); err != nil {
		t.Fatal(err)
	}
	start := topo.Deficits()[0] // a pass begins
	if err := topo.ReportDegradedWrite(1, []string{a.URL}, now); err != nil {
		t.Fatal(err)
	}
	if topo.CaughtUpSince(1, b.URL, start.Epoch, 0, nil, now) {
		t.Fatal("a pass older than the last missed write made the copy good")
	}
	if !topo.CaughtUpSince(1, b.URL, topo.Deficits()[0].Epoch, 0, nil, now) || len(topo.Deficits()) != 0 {
		t.Fatalf("a current pass with nothing to copy: %+v", topo.Deficits())
	}
}

// TestBehindCopyCannotAcknowledgeShortWrites: once a write reached only a,
// a short write that reached only b (the other side of a partition between
// the copies) is refused: acknowledged, it would be a write a lacks, and a
// catch-up from a would never copy it. A write that reached a too is fine.
func TestBehindCopyCannotAcknowledgeShortWrites(t *testing.T) {
	topo, _, _, a, b := twoCopies()
	now := time.Unix(1_700_000_000, 0)
	topo.UpdateNode(a, now)
	topo.UpdateNode(b, now)
	if err := topo.ReportDegradedWrite(1, []string{a.URL}, now); err != nil {
		t.Fatal(err)
	}
	if err := topo.ReportDegradedWrite(1, []string{b.URL}, now); !errors.Is(err, ErrBehindCopy) {
		t.Fatalf("a short write on the behind copy: %v, want ErrBehindCopy", err)
	}
	if ds := topo.Deficits(); len(ds) != 1 || !slices.Equal(ds[0].Good, []string{a.URL}) {
		t.Fatalf("the refused report changed the good copies: %+v", ds)
	}
	if err := topo.ReportDegradedWrite(1, []string{a.URL, b.URL}, now); err != nil {
		t.Fatalf("a write on both copies reported: %v", err)
	}
}
