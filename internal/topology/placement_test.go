package topology

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/replication"
)

func allCodes() []replication.Code {
	var out []replication.Code
	for x := uint8(0); x <= 2; x++ {
		for y := uint8(0); y <= 2; y++ {
			for z := uint8(0); z <= 2; z++ {
				out = append(out, replication.Code{DiffDataCenter: x, DiffRack: y, SameRack: z})
			}
		}
	}
	return out
}

// validPlacement checks a set of servers against the code by definition,
// trying every main data center and main rack, independently of the planner.
func validPlacement(locs []Location, code replication.Code, wantDC string) bool {
	if len(locs) != code.Copies() {
		return false
	}
	seen := map[string]bool{}
	for _, l := range locs {
		if seen[l.URL] {
			return false
		}
		seen[l.URL] = true
	}
	for _, main := range locs {
		d := main.DataCenter
		if wantDC != "" && d != wantDC {
			continue
		}
		otherDCs := map[string]bool{}
		outside := 0
		for _, l := range locs {
			if l.DataCenter != d {
				outside++
				otherDCs[l.DataCenter] = true
			}
		}
		if outside != int(code.DiffDataCenter) || len(otherDCs) != outside {
			continue
		}
		for _, mr := range locs {
			if mr.DataCenter != d {
				continue
			}
			inRack, otherRack := 0, map[string]bool{}
			notRack := 0
			for _, l := range locs {
				switch {
				case l.DataCenter != d:
				case l.Rack == mr.Rack:
					inRack++
				default:
					notRack++
					otherRack[l.Rack] = true
				}
			}
			if inRack == int(code.SameRack)+1 && notRack == int(code.DiffRack) && len(otherRack) == notRack {
				return true
			}
		}
	}
	return false
}

// bruteForce reports whether any set of servers with free slots is a valid
// placement.
func bruteForce(cands []candidate, code replication.Code, wantDC string) bool {
	var usable []Location
	for _, c := range cands {
		if c.free > 0 {
			usable = append(usable, c.loc)
		}
	}
	k := code.Copies()
	pick := make([]Location, 0, k)
	var rec func(start int) bool
	rec = func(start int) bool {
		if len(pick) == k {
			return validPlacement(pick, code, wantDC)
		}
		for i := start; i < len(usable); i++ {
			pick = append(pick, usable[i])
			if rec(i + 1) {
				return true
			}
			pick = pick[:len(pick)-1]
		}
		return false
	}
	return rec(0)
}

func randomTopology(r *rand.Rand) []candidate {
	var out []candidate
	for d := 0; d < 1+r.IntN(3); d++ {
		for k := 0; k < 1+r.IntN(3); k++ {
			for s := 0; s < 1+r.IntN(3); s++ {
				out = append(out, candidate{
					loc:  Location{URL: fmt.Sprintf("10.%d.%d.%d:8080", d, k, s), DataCenter: fmt.Sprintf("dc%d", d), Rack: fmt.Sprintf("rack%d", k)},
					free: r.IntN(3),
				})
			}
		}
	}
	return out
}

func TestPlanGrowthMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	iters := 400
	if testing.Short() {
		iters = 100
	}
	for it := 0; it < iters; it++ {
		cands := randomTopology(r)
		for _, code := range allCodes() {
			for _, wantDC := range []string{"", "dc1"} {
				want := bruteForce(cands, code, wantDC)
				count := 1 + r.IntN(4)
				plans, err := planGrowth(append([]candidate(nil), cands...), code, count, PlanOptions{DataCenter: wantDC})
				if (err == nil) != want {
					t.Fatalf("iter %d code %s dc %q: planner err=%v, brute force says possible=%v\n%v", it, code, wantDC, err, want, cands)
				}
				if err != nil {
					if !errors.Is(err, ErrNoPlacement) {
						t.Fatalf("error does not wrap ErrNoPlacement: %v", err)
					}
					continue
				}
				if len(plans) > count {
					t.Fatalf("%d plans for count %d", len(plans), count)
				}
				used := map[string]int{}
				for _, p := range plans {
					if !validPlacement(p.Locations, code, wantDC) {
						t.Fatalf("code %s: invalid plan %+v", code, p.Locations)
					}
					for _, l := range p.Locations {
						used[l.URL]++
					}
				}
				for _, c := range cands {
					if used[c.loc.URL] > c.free {
						t.Fatalf("server %s used %d times with %d free slots", c.loc.URL, used[c.loc.URL], c.free)
					}
				}
			}
		}
	}
}

func TestPlanGrowthPrefersFreeServers(t *testing.T) {
	cands := []candidate{
		{Location{URL: "a:1", DataCenter: "dc1", Rack: "r1"}, 1},
		{Location{URL: "b:1", DataCenter: "dc1", Rack: "r1"}, 5},
		{Location{URL: "c:1", DataCenter: "dc1", Rack: "r2"}, 3},
	}
	plans, err := planGrowth(cands, replication.Code{}, 3, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range plans {
		got = append(got, p.Locations[0].URL)
	}
	// r1 has 6 free slots and b is its freest server; after two volumes r1
	// (4) still leads r2 (3) but b (3) ties c, so the third goes to b again.
	if strings.Join(got, " ") != "b:1 b:1 b:1" {
		t.Fatalf("first volume on %s, want the server with most free slots", got[0])
	}
}

func TestPlanGrowthErrors(t *testing.T) {
	one := func(url, dc, rack string, free int) candidate {
		return candidate{Location{URL: url, DataCenter: dc, Rack: rack}, free}
	}
	tests := []struct {
		code  string
		cands []candidate
		dc    string
		want  string
	}{
		{"000", nil, "", "no volume servers are connected"},
		{"000", []candidate{one("a", "dc1", "r1", 0)}, "", "none of the 1 volume servers has a free volume slot"},
		{"100", []candidate{one("a", "dc1", "r1", 1), one("b", "dc1", "r2", 1)}, "", "replication 100 needs 2 data centers with free slots; only dc1 has one"},
		{"200", []candidate{one("a", "dc1", "r1", 1), one("b", "dc2", "r2", 1)}, "", "replication 200 needs 3 data centers with free slots; only dc1, dc2 have them"},
		{"010", []candidate{one("a", "dc1", "r1", 1), one("b", "dc1", "r1", 1)}, "", "replication 010 needs 2 racks with free slots in one data center; the most is 1 (in dc1)"},
		{"001", []candidate{one("a", "dc1", "r1", 1), one("b", "dc1", "r2", 1)}, "", "replication 001 needs 2 servers with free slots in one rack; the most is 1 (in dc1/r1)"},
		{"000", []candidate{one("a", "dc1", "r1", 1)}, "dc9", `data center "dc9" has no volume server with a free slot`},
		{"011", []candidate{one("a", "dc1", "r1", 1), one("b", "dc1", "r1", 1), one("c", "dc2", "r2", 1), one("d", "dc2", "r3", 1)}, "", "no data center has a rack with 2 servers"},
	}
	for _, tt := range tests {
		code, _ := replication.Parse(tt.code)
		_, err := planGrowth(tt.cands, code, 1, PlanOptions{DataCenter: tt.dc})
		if !errors.Is(err, ErrNoPlacement) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("code %s: err = %v, want it to contain %q", tt.code, err, tt.want)
		}
	}
}

// TestPlanShortGrowth: with dc2 down, replication 100 is placed as one copy
// in dc1 and 110 as two copies in dc1's two racks; minCopies above what can
// be placed is refused.
func TestPlanShortGrowth(t *testing.T) {
	topo := New(Options{VolumeSizeLimit: 1 << 30})
	now := time.Unix(1_700_000_000, 0)
	for _, n := range []NodeInfo{
		{URL: "10.0.0.1:8080", DataCenter: "dc1", Rack: "r1", Disks: []Disk{{MaxVolumes: 4}}},
		{URL: "10.0.0.2:8080", DataCenter: "dc1", Rack: "r2", Disks: []Disk{{MaxVolumes: 4}}},
	} {
		topo.UpdateNode(n, now)
	}
	if _, err := topo.PlanGrowth(replication.Must("100"), 1, PlanOptions{}); !errors.Is(err, ErrNoPlacement) {
		t.Fatalf("full plan of 100 in one data center: %v", err)
	}
	plans, code, err := topo.PlanShortGrowth(replication.Must("100"), 1, 1, PlanOptions{})
	if err != nil || code.String() != "000" || len(plans) != 1 || len(plans[0].Locations) != 1 {
		t.Fatalf("short plan of 100: %+v %v %v", plans, code, err)
	}
	plans, code, err = topo.PlanShortGrowth(replication.Must("110"), 1, 1, PlanOptions{})
	if err != nil || code.String() != "010" || len(plans[0].Locations) != 2 {
		t.Fatalf("short plan of 110: %+v %v %v", plans, code, err)
	}
	if _, _, err := topo.PlanShortGrowth(replication.Must("100"), 1, 2, PlanOptions{}); !errors.Is(err, ErrNoPlacement) {
		t.Fatalf("short plan of 100 with minCopies 2: %v", err)
	}
}
