package topology

import (
	"testing"
	"time"
)

// TestShardPlacerSpreads: 14 shards over 2 racks of 2 servers go 7 per rack
// and 3 or 4 per server; with 2 data centers, 7 per data center.
func TestShardPlacerSpreads(t *testing.T) {
	nodes := []NodeInfo{
		{URL: "a:1", DataCenter: "dc1", Rack: "r1"}, {URL: "b:1", DataCenter: "dc1", Rack: "r1"},
		{URL: "c:1", DataCenter: "dc1", Rack: "r2"}, {URL: "d:1", DataCenter: "dc1", Rack: "r2"},
	}
	p := NewShardPlacer(nodes, nil)
	per := map[string]int{}
	for range 14 {
		url, err := p.Next()
		if err != nil {
			t.Fatal(err)
		}
		per[url]++
	}
	if per["a:1"]+per["b:1"] != 7 || per["c:1"]+per["d:1"] != 7 {
		t.Fatalf("racks unbalanced: %v", per)
	}
	for url, n := range per {
		if n < 3 || n > 4 {
			t.Fatalf("%s holds %d shards: %v", url, n, per)
		}
	}
	// Existing holders count, an excluded node gets nothing.
	p = NewShardPlacer(nodes, nil)
	p.Hold("a:1", 5)
	p.Exclude("b:1")
	for range 5 {
		url, _ := p.Next()
		if url == "a:1" || url == "b:1" {
			t.Fatalf("placed on %s", url)
		}
	}
	p = NewShardPlacer(nil, nil)
	if _, err := p.Next(); err == nil {
		t.Fatal("placed a shard with no node")
	}
}

// TestLookupFindsECHolders: a volume known only by its shards is looked up
// as its holders, each with its shard mask; the shards leave with the node.
func TestLookupFindsECHolders(t *testing.T) {
	topo := New(Options{VolumeSizeLimit: 1 << 20})
	now := time.Now()
	for i, url := range []string{"a:1", "b:1"} {
		topo.UpdateNode(NodeInfo{URL: url, Disks: []Disk{{MaxVolumes: 4,
			EcShards: []EcShards{{ID: 9, Collection: "c", Scheme: "4+2", Shards: 0b111 << (3 * i)}}}}}, now)
	}
	locs, err := topo.Lookup(9)
	if err != nil || len(locs) != 2 || locs[0].EcShards != 0b111 || locs[1].EcShards != 0b111000 {
		t.Fatalf("lookup: %+v %v", locs, err)
	}
	ec, ok := topo.LookupEC(9)
	if !ok || ec.Scheme != "4+2" || ec.Collection != "c" {
		t.Fatalf("LookupEC: %+v %v", ec, ok)
	}
	st := topo.EcStatus()
	if len(st) != 1 || st[0].Shards != 6 || st[0].Total != 6 || len(st[0].Missing) != 0 || !st[0].Readable {
		t.Fatalf("EcStatus: %+v", st)
	}
	topo.RemoveNode("a:1")
	if st := topo.EcStatus(); len(st) != 1 || st[0].Shards != 3 || len(st[0].Missing) != 3 || st[0].Readable {
		t.Fatalf("EcStatus with a holder gone: %+v", st)
	}
	topo.RemoveNode("b:1")
	if _, err := topo.Lookup(9); err == nil {
		t.Fatal("lookup after every holder left")
	}
}
