package topology

import (
	"strings"
	"testing"
	"time"
)

func TestFindDivergentCopies(t *testing.T) {
	now := time.Unix(1000, 0)
	node := func(url string, vols ...Volume) NodeInfo {
		return NodeInfo{URL: url, Disks: []Disk{{MaxVolumes: 10, Volumes: vols}}}
	}
	nodes := []NodeInfo{
		node("a:1",
			Volume{ID: 1, FileCount: 10, Size: 1000},
			Volume{ID: 2, FileCount: 10, Size: 1000, ReadOnly: true},
			Volume{ID: 3, FileCount: 10, Size: 1000, ModifiedAt: now.Add(-time.Second)},
			Volume{ID: 4, FileCount: 10, Size: 1000},
			Volume{ID: 5, FileCount: 5, Size: 900, DeletedBytes: 400}),
		node("b:1",
			Volume{ID: 1, FileCount: 8, Size: 800},
			Volume{ID: 2, FileCount: 9, Size: 900, ReadOnly: true},
			Volume{ID: 3, FileCount: 11, Size: 1100, ModifiedAt: now.Add(-time.Second)},
			Volume{ID: 4, FileCount: 10, Size: 1000},
			// vacuumed: same live data, less garbage
			Volume{ID: 5, FileCount: 5, Size: 500}),
	}
	got := FindDivergentCopies(nodes, now, 10*time.Second)
	want := map[uint32]DivergenceKind{1: DivergenceWritable, 2: DivergenceSealed, 3: DivergenceActive}
	if len(got) != len(want) {
		t.Fatalf("divergent volumes %+v, want %v", got, want)
	}
	for _, d := range got {
		if want[d.VolumeID] != d.Kind {
			t.Errorf("volume %d: kind %v, want %v", d.VolumeID, d.Kind, want[d.VolumeID])
		}
		if len(d.Copies) != 2 || d.Copies[0].URL != "a:1" {
			t.Errorf("volume %d copies %+v", d.VolumeID, d.Copies)
		}
	}
	if s := got[0].String(); !strings.Contains(s, "a:1: 10 files") || !strings.Contains(s, "b:1: 8 files") {
		t.Errorf("description %q", s)
	}
}
