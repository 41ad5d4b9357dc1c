package topology

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/replication"
)

func fixCode(t testing.TB, s string) replication.Code {
	t.Helper()
	c, err := replication.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func fixLoc(spec string) Location {
	// "dc/rack/url"
	p := strings.Split(spec, "/")
	return Location{DataCenter: p[0], Rack: p[1], URL: p[2]}
}

func TestCheckPlacement(t *testing.T) {
	for _, tc := range []struct {
		code string
		locs []string
		ok   bool
		want string // part of the error
	}{
		{"000", []string{"d1/r1/a"}, true, ""},
		{"000", []string{"d1/r1/a", "d1/r1/b"}, false, "2 copies, replication 000 needs 1"},
		{"001", []string{"d1/r1/a", "d1/r1/b"}, true, ""},
		{"001", []string{"d1/r1/a", "d1/r1/a"}, false, "two copies on a"},
		{"001", []string{"d1/r1/a", "d1/r2/b"}, false, "copies in 2 racks of d1, replication 001 needs 1"},
		{"011", []string{"d1/r1/a", "d1/r2/b", "d1/r3/c"}, false, "copies in 3 racks"},
		{"010", []string{"d1/r1/a", "d1/r2/b"}, true, ""},
		{"010", []string{"d1/r1/a", "d1/r1/b"}, false, "copies in 1 racks of d1"},
		{"100", []string{"d1/r1/a", "d1/r1/b"}, false, "copies in 1 data centers, replication 100 needs 2"},
		{"100", []string{"d1/r1/a", "d2/r1/b"}, true, ""},
		{"200", []string{"d1/r1/a", "d2/r1/b", "d3/r1/c"}, true, ""},
		{"200", []string{"d1/r1/a", "d2/r1/b", "d2/r2/c"}, false, "copies in 2 data centers"},
		{"110", []string{"d1/r1/a", "d1/r2/b", "d2/r1/c"}, true, ""},
		{"110", []string{"d1/r1/a", "d1/r1/b", "d2/r1/c"}, false, "copies in 1 racks of d1"},
		{"111", []string{"d1/r1/a", "d1/r1/b", "d1/r2/c", "d2/r9/d"}, true, ""},
		{"111", []string{"d1/r1/a", "d1/r2/b", "d1/r3/c", "d2/r9/d"}, false, "copies in 3 racks"},
		{"011", []string{"d1/r1/a", "d1/r2/b", "d2/r1/c"}, false, "copies in 2 data centers"},
		{"002", []string{"d1/r1/a", "d1/r1/b", "d1/r1/c"}, true, ""},
		{"020", []string{"d1/r1/a", "d1/r2/b", "d1/r2/c"}, false, "copies in 2 racks of d1"},
	} {
		var locs []Location
		for _, l := range tc.locs {
			locs = append(locs, fixLoc(l))
		}
		err := CheckPlacement(fixCode(t, tc.code), locs)
		if (err == nil) != tc.ok {
			t.Errorf("%s %v: err = %v, want ok=%v", tc.code, tc.locs, err, tc.ok)
			continue
		}
		if err != nil && (!errors.Is(err, ErrPlacementViolated) || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s %v: err = %v, want %q", tc.code, tc.locs, err, tc.want)
		}
	}
}

// fixCluster builds nodes "dc/rack/url" with max volume slots each.
func fixCluster(maxVolumes int, specs ...string) []NodeInfo {
	var out []NodeInfo
	for _, s := range specs {
		l := fixLoc(s)
		out = append(out, NodeInfo{URL: l.URL, DataCenter: l.DataCenter, Rack: l.Rack, Disks: []Disk{{MaxVolumes: maxVolumes}}})
	}
	return out
}

func fixAdd(nodes []NodeInfo, url string, v Volume) {
	for i := range nodes {
		if nodes[i].URL == url {
			nodes[i].Disks[0].Volumes = append(nodes[i].Disks[0].Volumes, v)
			return
		}
	}
	panic("no node " + url)
}

func fixStrings(steps []Step) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.String())
	}
	return out
}

// The scenario: a volume written under 001 (two copies in one rack)
// is reconfigured to 100.
func TestPlanReplicationFixOneRackToTwoDataCenters(t *testing.T) {
	nodes := fixCluster(8, "dc1/r1/a", "dc1/r1/b", "dc1/r2/c", "dc1/r2/d", "dc2/r1/e", "dc2/r1/f", "dc2/r2/g", "dc2/r2/h")
	v := Volume{ID: 7, Collection: "pics", Replication: fixCode(t, "100")}
	fixAdd(nodes, "a", v)
	fixAdd(nodes, "b", v)
	fixAdd(nodes, "f", Volume{ID: 8, Replication: fixCode(t, "000")}) // f has fewer free slots than e
	plan := PlanReplicationFix(nodes)
	want := []string{
		"copy volume 7 from a to e (copies in 1 data centers, replication 100 needs 2)",
		"delete volume 7 on b (copies in 1 data centers, replication 100 needs 2)",
	}
	if got := fixStrings(plan.Steps); !slices.Equal(got, want) || len(plan.Unfixable) != 0 {
		t.Fatalf("steps:\n%s\nunfixable %v\nwant:\n%s", strings.Join(got, "\n"), plan.Unfixable, strings.Join(want, "\n"))
	}
	if plan.Steps[0].Collection != "pics" || plan.Steps[0].Action != StepCopy || plan.Steps[1].Action != StepDelete {
		t.Fatalf("steps %+v", plan.Steps)
	}
}

func TestPlanReplicationFixUnfixable(t *testing.T) {
	nodes := fixCluster(8, "dc1/r1/a", "dc1/r1/b")
	fixAdd(nodes, "a", Volume{ID: 1, Replication: fixCode(t, "100")})
	fixAdd(nodes, "b", Volume{ID: 1, Replication: fixCode(t, "100")})
	plan := PlanReplicationFix(nodes)
	if len(plan.Steps) != 0 || len(plan.Unfixable) != 1 || !errors.Is(plan.Unfixable[0].Err, ErrNoPlacement) ||
		!strings.Contains(plan.Unfixable[0].Err.Error(), "needs 2 data centers") {
		t.Fatalf("plan %+v", plan)
	}
}

func TestPlanReplicationFixSkipsFullNodes(t *testing.T) {
	// 001 with one copy: the only other server of the rack is full, so the
	// volume cannot get its second copy there, and no other rack helps.
	nodes := fixCluster(1, "dc1/r1/a", "dc1/r1/b", "dc1/r2/c")
	fixAdd(nodes, "a", Volume{ID: 1, Replication: fixCode(t, "001")})
	fixAdd(nodes, "b", Volume{ID: 2, Replication: fixCode(t, "000")})
	plan := PlanReplicationFix(nodes)
	if len(plan.Steps) != 0 || len(plan.Unfixable) != 1 || plan.Unfixable[0].VolumeID != 1 {
		t.Fatalf("plan %+v", plan)
	}
}

// fixWorld is a simulated cluster the property tests apply plans to.
type fixWorld struct {
	nodes map[string]NodeInfo // loc and capacity
	has   map[string]map[uint32]bool
	codes map[uint32]replication.Code
}

func newFixWorld(nodes []NodeInfo) *fixWorld {
	w := &fixWorld{nodes: map[string]NodeInfo{}, has: map[string]map[uint32]bool{}, codes: map[uint32]replication.Code{}}
	for _, n := range nodes {
		w.nodes[n.URL] = n
		w.has[n.URL] = map[uint32]bool{}
		for _, v := range n.Disks[0].Volumes {
			w.has[n.URL][v.ID] = true
			w.codes[v.ID] = v.Replication
		}
	}
	return w
}

func (w *fixWorld) copiesOf(id uint32) []Location {
	var out []Location
	for u, vs := range w.has {
		if vs[id] {
			n := w.nodes[u]
			out = append(out, Location{URL: u, DataCenter: n.DataCenter, Rack: n.Rack})
		}
	}
	return out
}

// apply executes steps, failing on any step a real cluster would refuse or
// that would lose data.
func (w *fixWorld) apply(t *testing.T, steps []Step) {
	t.Helper()
	for i, s := range steps {
		switch s.Action {
		case StepCopy:
			if !w.has[s.Source][s.VolumeID] {
				t.Fatalf("step %d %v: source has no copy", i, s)
			}
			if w.has[s.Node][s.VolumeID] {
				t.Fatalf("step %d %v: target already has a copy", i, s)
			}
			if len(w.has[s.Node]) >= w.nodes[s.Node].Disks[0].MaxVolumes {
				t.Fatalf("step %d %v: target is full", i, s)
			}
			w.has[s.Node][s.VolumeID] = true
		case StepDelete:
			if !w.has[s.Node][s.VolumeID] {
				t.Fatalf("step %d %v: no copy to delete", i, s)
			}
			if len(w.copiesOf(s.VolumeID)) < 2 {
				t.Fatalf("step %d %v: deletes the last copy", i, s)
			}
			delete(w.has[s.Node], s.VolumeID)
		default:
			t.Fatalf("step %d: bad action %v", i, s)
		}
	}
}

func (w *fixWorld) snapshot() []NodeInfo {
	var out []NodeInfo
	for u, n := range w.nodes {
		n.Disks = []Disk{{MaxVolumes: n.Disks[0].MaxVolumes}}
		for id := range w.has[u] {
			n.Disks[0].Volumes = append(n.Disks[0].Volumes, Volume{ID: id, Replication: w.codes[id]})
		}
		out = append(out, n)
	}
	return out
}

// fixRandomCluster makes a random topology with random, often wrong,
// placements. Node count stays small so a brute force can check the planner.
func fixRandomCluster(r *rand.Rand, maxDC, maxRacks, maxServers, volumes int) []NodeInfo {
	var nodes []NodeInfo
	for d := range 1 + r.IntN(maxDC) {
		for k := range 1 + r.IntN(maxRacks) {
			for s := range 1 + r.IntN(maxServers) {
				nodes = append(nodes, NodeInfo{
					URL: fmt.Sprintf("n%d%d%d", d, k, s), DataCenter: fmt.Sprintf("dc%d", d), Rack: fmt.Sprintf("r%d", k),
					Disks: []Disk{{MaxVolumes: 1 + r.IntN(4)}},
				})
			}
		}
	}
	for id := uint32(1); id <= uint32(volumes); id++ {
		code := replication.Code{DiffDataCenter: uint8(r.IntN(3)), DiffRack: uint8(r.IntN(3)), SameRack: uint8(r.IntN(3))}
		for _, i := range r.Perm(len(nodes))[:1+r.IntN(min(4, len(nodes)))] {
			d := &nodes[i].Disks[0]
			if len(d.Volumes) < d.MaxVolumes {
				d.Volumes = append(d.Volumes, Volume{ID: id, Replication: code})
			}
		}
	}
	return nodes
}

// fixBestKept tries every subset of nodes: the most existing copies a valid
// placement of volume id can keep, or -1 when no placement is valid.
func fixBestKept(nodes []NodeInfo, id uint32, code replication.Code) int {
	has := map[string]bool{}
	var eligible []NodeInfo
	for _, n := range nodes {
		holds := slices.ContainsFunc(n.Disks[0].Volumes, func(v Volume) bool { return v.ID == id })
		has[n.URL] = holds
		if holds || len(n.Disks[0].Volumes) < n.Disks[0].MaxVolumes {
			eligible = append(eligible, n)
		}
	}
	best := -1
	want := code.Copies()
	for mask := 0; mask < 1<<len(eligible); mask++ {
		var locs []Location
		kept := 0
		for i, n := range eligible {
			if mask&(1<<i) != 0 {
				locs = append(locs, Location{URL: n.URL, DataCenter: n.DataCenter, Rack: n.Rack})
				if has[n.URL] {
					kept++
				}
			}
		}
		if len(locs) == want && kept > best && CheckPlacement(code, locs) == nil {
			best = kept
		}
	}
	return best
}

// One volume at a time: the planner finds a fix exactly when one exists, and
// keeps as many existing copies as the best valid placement.
func TestPlanReplicationFixMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	fixed, impossible := 0, 0
	for iter := range 600 {
		nodes := fixRandomCluster(r, 3, 2, 2, 1)
		var code replication.Code
		found := false
		for _, n := range nodes {
			for _, v := range n.Disks[0].Volumes {
				code, found = v.Replication, true
			}
		}
		if !found {
			continue
		}
		bestKept := fixBestKept(nodes, 1, code)
		plan := PlanReplicationFix(nodes)
		w := newFixWorld(nodes)
		before := len(w.copiesOf(1))
		valid := CheckPlacement(code, w.copiesOf(1)) == nil
		w.apply(t, plan.Steps)
		switch {
		case valid:
			if len(plan.Steps) != 0 {
				t.Fatalf("iter %d: valid placement got steps %v", iter, fixStrings(plan.Steps))
			}
		case bestKept < 0:
			if len(plan.Unfixable) != 1 || len(plan.Steps) != 0 {
				t.Fatalf("iter %d: no valid placement exists, plan %+v", iter, plan)
			}
			impossible++
		default:
			if len(plan.Unfixable) != 0 {
				t.Fatalf("iter %d: code %s: a placement exists but planner says %v", iter, code, plan.Unfixable[0].Err)
			}
			if err := CheckPlacement(code, w.copiesOf(1)); err != nil {
				t.Fatalf("iter %d: after plan %v: %v", iter, fixStrings(plan.Steps), err)
			}
			copies := 0
			for _, s := range plan.Steps {
				if s.Action == StepCopy {
					copies++
				}
			}
			if copies != code.Copies()-bestKept {
				t.Fatalf("iter %d: %d copies planned, best placement needs %d (had %d)", iter, copies, code.Copies()-bestKept, before)
			}
			fixed++
		}
	}
	// The generator must exercise both outcomes for the test to mean much.
	if fixed < 50 || impossible < 50 {
		t.Fatalf("only %d fixable and %d impossible cases", fixed, impossible)
	}
}

// Many volumes competing for slots: every volume not reported unfixable
// satisfies its code afterwards, deletes never precede the copies of the same
// volume, and a second plan has nothing left to do for them.
func TestPlanReplicationFixManyVolumes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for iter := range 300 {
		nodes := fixRandomCluster(r, 3, 3, 3, 1+r.IntN(8))
		plan := PlanReplicationFix(nodes)
		lastCopy, firstDelete := map[uint32]int{}, map[uint32]int{}
		for i, s := range plan.Steps {
			if s.Action == StepCopy {
				lastCopy[s.VolumeID] = i
			} else if _, ok := firstDelete[s.VolumeID]; !ok {
				firstDelete[s.VolumeID] = i
			}
		}
		for id, d := range firstDelete {
			if c, ok := lastCopy[id]; ok && c > d {
				t.Fatalf("iter %d: volume %d deleted at step %d before its copy at %d", iter, id, d, c)
			}
		}
		w := newFixWorld(nodes)
		w.apply(t, plan.Steps)
		unfixable := map[uint32]bool{}
		for _, p := range plan.Unfixable {
			unfixable[p.VolumeID] = true
			if !errors.Is(p.Err, ErrNoPlacement) {
				t.Fatalf("iter %d: %v", iter, p.Err)
			}
		}
		for id, code := range w.codes {
			if unfixable[id] {
				continue
			}
			if err := CheckPlacement(code, w.copiesOf(id)); err != nil {
				t.Fatalf("iter %d: volume %d after plan: %v\n%s", iter, id, err, strings.Join(fixStrings(plan.Steps), "\n"))
			}
		}
		for _, s := range PlanReplicationFix(w.snapshot()).Steps {
			if !unfixable[s.VolumeID] {
				t.Fatalf("iter %d: second plan still fixes volume %d: %v", iter, s.VolumeID, s)
			}
		}
	}
}

func TestPlanBalance(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	moves := 0
	for iter := range 300 {
		// Valid placements from the fix planner on an empty-ish cluster.
		nodes := fixRandomCluster(r, 3, 3, 3, 0)
		for i := range nodes {
			nodes[i].Disks[0].MaxVolumes = 2 + r.IntN(6)
		}
		id := uint32(1)
		skew := r.IntN(len(nodes))
		for range 2 + r.IntN(10) {
			// Pile single copies on one node to make work for the balancer,
			// plus some replicated volumes placed by the fix planner.
			if r.IntN(2) == 0 && len(nodes[skew].Disks[0].Volumes) < nodes[skew].Disks[0].MaxVolumes {
				nodes[skew].Disks[0].Volumes = append(nodes[skew].Disks[0].Volumes, Volume{ID: id, Size: uint64(r.IntN(100))})
				id++
				continue
			}
			code := replication.Code{DiffDataCenter: uint8(r.IntN(2)), DiffRack: uint8(r.IntN(2)), SameRack: uint8(r.IntN(2))}
			seed := slices.IndexFunc(nodes, func(n NodeInfo) bool { return len(n.Disks[0].Volumes) < n.Disks[0].MaxVolumes })
			if seed < 0 {
				break
			}
			fixAdd(nodes, nodes[seed].URL, Volume{ID: id, Replication: code})
			w := newFixWorld(nodes)
			plan := PlanReplicationFix(nodes)
			w.apply(t, plan.Steps)
			nodes = w.snapshot()
			slices.SortFunc(nodes, func(a, b NodeInfo) int { return strings.Compare(a.URL, b.URL) })
			skew = min(skew, len(nodes)-1)
			id++
		}
		w := newFixWorld(nodes)
		slots := map[string]int{}
		for _, n := range nodes {
			slots[n.URL] = n.Disks[0].MaxVolumes
		}
		// imbalance is what balancing lowers: the sum of count²/slots.
		imbalance := func() float64 {
			sum := 0.0
			for u, vs := range w.has {
				sum += float64(len(vs)*len(vs)) / float64(slots[u])
			}
			return sum
		}
		validBefore := map[uint32]bool{}
		for vid, code := range w.codes {
			validBefore[vid] = CheckPlacement(code, w.copiesOf(vid)) == nil
		}
		before := imbalance()
		steps := PlanBalance(nodes)
		for i := 0; i < len(steps); i += 2 {
			c, d := steps[i], steps[i+1]
			if c.Action != StepCopy || d.Action != StepDelete || c.VolumeID != d.VolumeID || c.Source != d.Node {
				t.Fatalf("iter %d: steps %d,%d are not a move: %v / %v", iter, i, i+1, c, d)
			}
		}
		w.apply(t, steps)
		for vid, code := range w.codes {
			if validBefore[vid] {
				if err := CheckPlacement(code, w.copiesOf(vid)); err != nil {
					t.Fatalf("iter %d: balance broke volume %d: %v", iter, vid, err)
				}
			}
		}
		const eps = 1e-9 // sums over a map: the order, hence rounding, varies
		if after := imbalance(); after > before+eps || (len(steps) > 0 && after > before-eps) {
			t.Fatalf("iter %d: imbalance %.3f -> %.3f after %d moves", iter, before, after, len(steps)/2)
		}
		if len(PlanBalance(w.snapshot())) != 0 {
			t.Fatalf("iter %d: balance is not idempotent", iter)
		}
		moves += len(steps) / 2
	}
	if moves < 100 {
		t.Fatalf("only %d moves in all cases", moves)
	}
}

// A node with three times the slots ends with about three times the volumes.
func TestPlanBalanceFollowsSlots(t *testing.T) {
	nodes := fixCluster(4, "dc1/r1/a", "dc1/r1/b", "dc1/r1/c")
	nodes[2].Disks[0].MaxVolumes = 12 // c
	for id := uint32(1); id <= 10; id++ {
		fixAdd(nodes, "a", Volume{ID: id})
	}
	nodes[0].Disks[0].MaxVolumes = 10 // a holds 10 of 10; b has 4 slots
	w := newFixWorld(nodes)
	w.apply(t, PlanBalance(nodes))
	a, b, c := len(w.has["a"]), len(w.has["b"]), len(w.has["c"])
	// 10 volumes over 10 + 4 + 12 slots: about 3.8, 1.5 and 4.6.
	if a+b+c != 10 || a < 3 || a > 5 || b < 1 || b > 2 || c < 4 || c > 6 {
		t.Fatalf("a %d/10, b %d/4, c %d/12", a, b, c)
	}
}

// Single-copy volumes on equal nodes always end within one of each other.
func TestPlanBalanceEvensOutSingleCopies(t *testing.T) {
	nodes := fixCluster(10, "dc1/r1/a", "dc1/r1/b", "dc1/r2/c", "dc2/r1/d")
	for id := uint32(1); id <= 9; id++ {
		fixAdd(nodes, "a", Volume{ID: id, Size: uint64(100 - id)})
	}
	steps := PlanBalance(nodes)
	w := newFixWorld(nodes)
	w.apply(t, steps)
	counts := []int{len(w.has["a"]), len(w.has["b"]), len(w.has["c"]), len(w.has["d"])}
	if slices.Max(counts)-slices.Min(counts) > 1 || len(steps) != 2*6 {
		t.Fatalf("counts %v after %d steps:\n%s", counts, len(steps), strings.Join(fixStrings(steps), "\n"))
	}
	// The smallest volume moves first.
	if steps[0].VolumeID != 9 || steps[0].Source != "a" {
		t.Fatalf("first step %v", steps[0])
	}
}
