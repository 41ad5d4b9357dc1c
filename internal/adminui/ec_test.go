package adminui

import (
	"regexp"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/topology"
)

// TestVolumesPageShowsEcShards lists erasure-coded volumes on the volumes
// page: shards present of k+m, the missing ones, the servers holding them,
// readability; the collection filter applies to them too.
func TestVolumesPageShowsEcShards(t *testing.T) {
	src := newFakeSource(6, 30)
	// EC volume 900 (4+2, photos): shards 0-2 on server 0, 3-5 on server 1,
	// complete. EC volume 901 (4+2, logs): shards 0-2 on server 2 only:
	// 3, 4, 5 missing, not readable.
	put := func(i int, shards ...topology.EcShards) {
		info := src.infos[i]
		info.Disks[0].EcShards = append(info.Disks[0].EcShards, shards...)
		src.topo.UpdateNode(info, src.now)
	}
	put(0, topology.EcShards{ID: 900, Collection: "photos", Scheme: "4+2", Shards: 0b000111, ShardSize: 1 << 20})
	put(1, topology.EcShards{ID: 900, Collection: "photos", Scheme: "4+2", Shards: 0b111000, ShardSize: 1 << 20})
	put(2, topology.EcShards{ID: 901, Collection: "logs", Scheme: "4+2", Shards: 0b000111, ShardSize: 1 << 20})
	_, ts := newTestUI(t, src)
	c := noRedirect(nil)
	get := func(q string) string {
		t.Helper()
		code, page, _ := do(t, c, "GET", ts.URL+"/volumes?"+q, nil, basic("admin", "s3cret"))
		if code != 200 {
			t.Fatalf("GET /volumes?%s: %d %s", q, code, page)
		}
		return page
	}
	ecRow := regexp.MustCompile(`<tr class="(unmet)?"><td>(\d+)</td><td>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td>\s*<td>([^<]*)</td><td>(\d+)</td><td><span class="(ok|bad)">`)
	page := get("")
	i := strings.Index(page, `id="ec"`)
	if i < 0 {
		t.Fatalf("no EC table on the volumes page:\n%s", page)
	}
	rows := ecRow.FindAllStringSubmatch(page[i:], -1)
	if len(rows) != 2 {
		t.Fatalf("EC rows %v, want 2:\n%s", rows, page[i:])
	}
	// html/template writes + as &#43;.
	want := [][]string{
		{"", "900", "photos", "4&#43;2", "6/6", "", "2", "ok"},
		{"unmet", "901", "logs", "4&#43;2", "3/6", "3 4 5 ", "1", "bad"},
	}
	for j, w := range want {
		if got := rows[j][1:]; strings.Join(got, "|") != strings.Join(w, "|") {
			t.Errorf("EC row %d: %q, want %q", j, got, w)
		}
	}
	page = get("collection=logs")
	if rows := ecRow.FindAllStringSubmatch(page[strings.Index(page, `<h2>Erasure-coded volumes</h2>`):], -1); len(rows) != 1 || rows[0][2] != "901" {
		t.Errorf("collection=logs EC rows: %v, want only 901", rows)
	}
}
