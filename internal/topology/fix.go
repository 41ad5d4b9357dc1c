package topology

// Repair and balance planning for the admin shell (volume.fix.replication,
// volume.balance). Both are pure functions of a snapshot ([]NodeInfo, as the
// master's Topology RPC reports it) to an ordered list of steps; the shell
// executes them. Unexported names here carry a "fix" or "bal" prefix so that
// they cannot collide with the rest of the package, which is edited apart.

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kelpfs/kelp/internal/replication"
)

// ErrPlacementViolated: a volume's copies do not sit where its code says.
var ErrPlacementViolated = errors.New("topology: placement violates replication code")

// StepAction is what one step of a plan does.
type StepAction uint8

const (
	// StepCopy copies a volume from Source to Node (Node pulls it).
	StepCopy StepAction = iota + 1
	// StepDelete deletes the volume's copy on Node.
	StepDelete
)

// Step is one action of a repair or balance plan.
//
// Steps are ordered: a volume's deletes always come after the copies that
// replace them, and an executor must skip the later deletes of a volume once
// one of its copies failed, so that no copy is removed before its
// replacement is complete.
type Step struct {
	Action     StepAction
	VolumeID   uint32
	Collection string
	Source     string // StepCopy: URL of the node copied from
	Node       string // StepCopy: URL of the node that receives the copy; StepDelete: the node whose copy goes
	Reason     string
}

func (s Step) String() string {
	switch s.Action {
	case StepCopy:
		return fmt.Sprintf("copy volume %d from %s to %s (%s)", s.VolumeID, s.Source, s.Node, s.Reason)
	case StepDelete:
		return fmt.Sprintf("delete volume %d on %s (%s)", s.VolumeID, s.Node, s.Reason)
	}
	return fmt.Sprintf("step %d on volume %d", s.Action, s.VolumeID)
}

// VolumeProblem is a volume a plan could not repair, and why.
type VolumeProblem struct {
	VolumeID   uint32
	Collection string
	Err        error
}

// FixPlan is the result of PlanReplicationFix.
type FixPlan struct {
	Steps     []Step
	Unfixable []VolumeProblem
}

// CheckPlacement reports whether copies at locs satisfy code: one copy per
// server, X+1 data centers, one of which (the main one) holds 1+Y+Z copies in
// Y+1 racks, one rack holding Z+1 of them. The error wraps
// ErrPlacementViolated and says what is wrong.
func CheckPlacement(code replication.Code, locs []Location) error {
	x, y, z := int(code.DiffDataCenter), int(code.DiffRack), int(code.SameRack)
	if want := code.Copies(); len(locs) != want {
		return fmt.Errorf("%w: %d copies, replication %s needs %d", ErrPlacementViolated, len(locs), code, want)
	}
	byDC := map[string]map[string]int{}
	seen := map[string]bool{}
	for _, l := range locs {
		if seen[l.URL] {
			return fmt.Errorf("%w: two copies on %s", ErrPlacementViolated, l.URL)
		}
		seen[l.URL] = true
		dc, rack := fixDC(l.DataCenter), fixRack(l.Rack)
		if byDC[dc] == nil {
			byDC[dc] = map[string]int{}
		}
		byDC[dc][rack]++
	}
	if len(byDC) != x+1 {
		return fmt.Errorf("%w: copies in %d data centers, replication %s needs %d", ErrPlacementViolated, len(byDC), code, x+1)
	}
	// With the right totals, a data center holding 1+Y+Z copies leaves exactly
	// one for each of the others; likewise for racks inside it.
	for _, dc := range slices.Sorted(maps.Keys(byDC)) {
		racks := byDC[dc]
		n := 0
		for _, c := range racks {
			n += c
		}
		if n != 1+y+z {
			continue
		}
		if len(racks) != y+1 {
			return fmt.Errorf("%w: copies in %d racks of %s, replication %s needs %d", ErrPlacementViolated, len(racks), dc, code, y+1)
		}
		for _, c := range racks {
			if c == z+1 {
				return nil
			}
		}
		return fmt.Errorf("%w: no rack of %s holds %d copies, as replication %s needs", ErrPlacementViolated, dc, z+1, code)
	}
	return fmt.Errorf("%w: no data center holds %d copies, as replication %s needs", ErrPlacementViolated, 1+y+z, code)
}

func fixDC(s string) string   { return cmp.Or(s, DefaultDataCenter) }
func fixRack(s string) string { return cmp.Or(s, DefaultRack) }

// fixNode is a node as the planners see it.
type fixNode struct {
	loc  Location
	free int
}

// fixVolume is one volume id and where its copies are.
type fixVolume struct {
	id         uint32
	collection string
	code       replication.Code
	size       uint64
	copies     []string // node URLs, sorted
}

type fixSnapshot struct {
	nodes   map[string]*fixNode
	urls    []string // sorted
	volumes map[uint32]*fixVolume
	ids     []uint32 // sorted
}

func newFixSnapshot(nodes []NodeInfo) *fixSnapshot {
	s := &fixSnapshot{nodes: map[string]*fixNode{}, volumes: map[uint32]*fixVolume{}}
	codes := map[uint32]map[replication.Code]int{}
	for _, info := range nodes {
		n := &fixNode{loc: Location{URL: info.URL, PublicURL: info.PublicURL, DataCenter: fixDC(info.DataCenter), Rack: fixRack(info.Rack), GRPCPort: info.GRPCPort}}
		s.nodes[info.URL] = n
		s.urls = append(s.urls, info.URL)
		for _, d := range info.Disks {
			n.free += max(0, d.MaxVolumes-len(d.Volumes))
			for _, v := range d.Volumes {
				fv := s.volumes[v.ID]
				if fv == nil {
					fv = &fixVolume{id: v.ID, collection: v.Collection}
					s.volumes[v.ID] = fv
					s.ids = append(s.ids, v.ID)
					codes[v.ID] = map[replication.Code]int{}
				}
				fv.size = max(fv.size, v.Size)
				codes[v.ID][v.Replication]++
				if !slices.Contains(fv.copies, info.URL) {
					fv.copies = append(fv.copies, info.URL)
				}
			}
		}
	}
	slices.Sort(s.urls)
	slices.Sort(s.ids)
	for id, v := range s.volumes {
		slices.Sort(v.copies)
		// Copies normally agree; if a reconfiguration was interrupted, the
		// code most copies carry wins (ties: the larger code, so a repair
		// never lowers redundancy by accident).
		best, bestN := replication.Code{}, -1
		for c, n := range codes[id] {
			if n > bestN || (n == bestN && c.Byte() > best.Byte()) {
				best, bestN = c, n
			}
		}
		v.code = best
	}
	return s
}

func (s *fixSnapshot) locations(urls []string) []Location {
	out := make([]Location, len(urls))
	for i, u := range urls {
		out[i] = s.nodes[u].loc
	}
	return out
}

// PlanReplicationFix plans, for every volume whose copies do not satisfy its
// replication code, the copies to add and the copies to delete. The target
// placement of each volume keeps as many existing copies as any valid
// placement can, and new copies go to nodes with free slots (most free
// first). Volumes are planned in id order, each using the slots left by the
// ones before; slots freed by deletes are not counted. A volume with no
// valid placement gets no steps and is listed in Unfixable.
func PlanReplicationFix(nodes []NodeInfo) FixPlan {
	s := newFixSnapshot(nodes)
	var plan FixPlan
	for _, id := range s.ids {
		v := s.volumes[id]
		violation := CheckPlacement(v.code, s.locations(v.copies))
		if violation == nil {
			continue
		}
		target, err := s.placeVolume(v)
		if err != nil {
			plan.Unfixable = append(plan.Unfixable, VolumeProblem{VolumeID: id, Collection: v.collection, Err: err})
			continue
		}
		reason := strings.TrimPrefix(violation.Error(), ErrPlacementViolated.Error()+": ")
		for _, u := range target {
			if slices.Contains(v.copies, u) {
				continue
			}
			s.nodes[u].free--
			plan.Steps = append(plan.Steps, Step{Action: StepCopy, VolumeID: id, Collection: v.collection, Source: s.copySource(v, u), Node: u, Reason: reason})
		}
		for _, u := range v.copies {
			if !slices.Contains(target, u) {
				plan.Steps = append(plan.Steps, Step{Action: StepDelete, VolumeID: id, Collection: v.collection, Node: u, Reason: reason})
			}
		}
	}
	return plan
}

// copySource picks the existing copy closest to the target: same rack, then
// same data center, then the first by URL, to keep traffic local.
func (s *fixSnapshot) copySource(v *fixVolume, target string) string {
	t := s.nodes[target].loc
	score := func(u string) int {
		l := s.nodes[u].loc
		switch {
		case l.DataCenter == t.DataCenter && l.Rack == t.Rack:
			return 0
		case l.DataCenter == t.DataCenter:
			return 1
		}
		return 2
	}
	best := v.copies[0]
	for _, u := range v.copies[1:] {
		if score(u) < score(best) {
			best = u
		}
	}
	return best
}

// placeVolume returns a valid placement (node URLs) for v that keeps the most
// existing copies. A node is eligible when it holds a copy or has a free slot.
//
// For a fixed main data center D and main rack R the three groups of copies
// (Z+1 servers of R, one server in each of Y other racks of D, one server in
// each of X other data centers) draw from disjoint sets of nodes, so taking
// existing copies first in each group keeps the most copies possible for
// (D, R); trying every (D, R) then gives the best overall, and finds a
// placement whenever one exists.
func (s *fixSnapshot) placeVolume(v *fixVolume) ([]string, error) {
	x, y, z := int(v.code.DiffDataCenter), int(v.code.DiffRack), int(v.code.SameRack)
	has := map[string]bool{}
	for _, u := range v.copies {
		has[u] = true
	}
	// Eligible nodes by data center and rack, best first: holding a copy,
	// then most free slots, then by URL.
	better := func(a, b string) int {
		if has[a] != has[b] {
			if has[a] {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(s.nodes[b].free, s.nodes[a].free), cmp.Compare(a, b))
	}
	tree := map[string]map[string][]string{}
	for _, u := range s.urls {
		n := s.nodes[u]
		if !has[u] && n.free <= 0 {
			continue
		}
		if tree[n.loc.DataCenter] == nil {
			tree[n.loc.DataCenter] = map[string][]string{}
		}
		tree[n.loc.DataCenter][n.loc.Rack] = append(tree[n.loc.DataCenter][n.loc.Rack], u)
	}
	bestOf := func(urls []string) string { return slices.MinFunc(urls, better) }
	// pickGroups takes one node from each of n groups, groups with a copy first.
	pickGroups := func(reps []string, n int) []string {
		if len(reps) < n {
			return nil
		}
		slices.SortFunc(reps, better)
		return reps[:n]
	}
	var best []string
	bestKept := -1
	dcs := slices.Sorted(maps.Keys(tree))
	for _, d := range dcs {
		racks := slices.Sorted(maps.Keys(tree[d]))
		if len(dcs)-1 < x || len(racks)-1 < y {
			continue
		}
		var otherDCs []string
		for _, od := range dcs {
			if od == d {
				continue
			}
			var all []string
			for _, rs := range tree[od] {
				all = append(all, rs...)
			}
			otherDCs = append(otherDCs, bestOf(all))
		}
		farCopies := pickGroups(otherDCs, x)
		for _, r := range racks {
			servers := slices.Clone(tree[d][r])
			if len(servers) < z+1 {
				continue
			}
			slices.SortFunc(servers, better)
			var otherRacks []string
			for _, or := range racks {
				if or != r {
					otherRacks = append(otherRacks, bestOf(tree[d][or]))
				}
			}
			place := append(slices.Clone(servers[:z+1]), pickGroups(otherRacks, y)...)
			place = append(place, farCopies...)
			kept := 0
			for _, u := range place {
				if has[u] {
					kept++
				}
			}
			if kept > bestKept {
				best, bestKept = place, kept
			}
		}
	}
	if best == nil {
		return nil, s.fixDiagnose(v.code, tree)
	}
	slices.Sort(best)
	return best, nil
}

// fixDiagnose names the first need of code that the eligible nodes cannot meet.
func (s *fixSnapshot) fixDiagnose(code replication.Code, tree map[string]map[string][]string) error {
	x, y, z := int(code.DiffDataCenter), int(code.DiffRack), int(code.SameRack)
	if len(tree) < x+1 {
		return fmt.Errorf("%w: replication %s needs %d data centers with a copy or a free slot; there are %d",
			ErrNoPlacement, code, x+1, len(tree))
	}
	maxRacks, maxServers := 0, 0
	for _, racks := range tree {
		maxRacks = max(maxRacks, len(racks))
		for _, servers := range racks {
			maxServers = max(maxServers, len(servers))
		}
	}
	if maxRacks < y+1 {
		return fmt.Errorf("%w: replication %s needs %d racks with a copy or a free slot in one data center; the most is %d",
			ErrNoPlacement, code, y+1, maxRacks)
	}
	if maxServers < z+1 {
		return fmt.Errorf("%w: replication %s needs %d servers with a copy or a free slot in one rack; the most is %d",
			ErrNoPlacement, code, z+1, maxServers)
	}
	return fmt.Errorf("%w: replication %s: no data center has a rack with %d eligible servers and %d other eligible racks while %d other data centers are eligible",
		ErrNoPlacement, code, z+1, y, x)
}

// PlanBalance plans moves (a copy, then the delete of the copy it replaces)
// that even out how full the nodes are: volumes relative to volume slots,
// so that a server with twice the slots ends up with about twice the
// volumes. A volume moves only when that lowers the sum over nodes of
// count²/slots (with equal slots: from a node with at least two more
// volumes), only to a node with a free slot that does not hold it yet, and
// only when its placement stays valid; volumes whose placement is already
// wrong are left to PlanReplicationFix. Smaller volumes move first, since
// they are cheaper. Every move strictly lowers that sum, so planning ends.
func PlanBalance(nodes []NodeInfo) []Step {
	s := newFixSnapshot(nodes)
	count := map[string]int{}
	for _, id := range s.ids {
		for _, u := range s.volumes[id].copies {
			count[u]++
		}
	}
	slots := map[string]int{}
	for _, u := range s.urls {
		slots[u] = count[u] + s.nodes[u].free
	}
	// fuller orders nodes from the fullest; a cross-multiplied comparison of
	// count/slots, so that no rounding decides.
	fuller := func(a, b string) int {
		return cmp.Or(cmp.Compare(count[b]*slots[a], count[a]*slots[b]), cmp.Compare(a, b))
	}
	// worthMoving: moving one volume from one node to another lowers the
	// sum of count²/slots, i.e. (2·to+1)/slots[to] < (2·from-1)/slots[from].
	worthMoving := func(from, to string) bool {
		return slots[to] > 0 && slots[from] > 0 && (2*count[to]+1)*slots[from] < (2*count[from]-1)*slots[to]
	}
	// Candidate volumes per node, smallest first.
	byNode := map[string][]*fixVolume{}
	for _, id := range s.ids {
		v := s.volumes[id]
		for _, u := range v.copies {
			byNode[u] = append(byNode[u], v)
		}
	}
	for _, vs := range byNode {
		slices.SortFunc(vs, func(a, b *fixVolume) int { return cmp.Or(cmp.Compare(a.size, b.size), cmp.Compare(a.id, b.id)) })
	}
	var steps []Step
	for {
		order := slices.Clone(s.urls)
		slices.SortFunc(order, fuller)
		moved := false
	search:
		for _, from := range order {
			for i := len(order) - 1; i >= 0; i-- {
				to := order[i]
				if !worthMoving(from, to) {
					continue
				}
				if s.nodes[to].free <= 0 {
					continue
				}
				v := s.balPick(byNode[from], from, to)
				if v == nil {
					continue
				}
				reason := fmt.Sprintf("balance: %s has %d volumes in %d slots, %s has %d in %d",
					from, count[from], slots[from], to, count[to], slots[to])
				steps = append(steps,
					Step{Action: StepCopy, VolumeID: v.id, Collection: v.collection, Source: from, Node: to, Reason: reason},
					Step{Action: StepDelete, VolumeID: v.id, Collection: v.collection, Node: from, Reason: reason})
				v.copies[slices.Index(v.copies, from)] = to
				slices.Sort(v.copies)
				byNode[from] = slices.DeleteFunc(byNode[from], func(x *fixVolume) bool { return x == v })
				byNode[to] = append(byNode[to], v)
				slices.SortFunc(byNode[to], func(a, b *fixVolume) int { return cmp.Or(cmp.Compare(a.size, b.size), cmp.Compare(a.id, b.id)) })
				count[from]--
				count[to]++
				s.nodes[from].free++
				s.nodes[to].free--
				moved = true
				break search
			}
		}
		if !moved {
			return steps
		}
	}
}

// balPick returns the first of vs that may move from one node to another.
func (s *fixSnapshot) balPick(vs []*fixVolume, from, to string) *fixVolume {
	for _, v := range vs {
		if slices.Contains(v.copies, to) || CheckPlacement(v.code, s.locations(v.copies)) != nil {
			continue
		}
		after := slices.Clone(v.copies)
		after[slices.Index(after, from)] = to
		if CheckPlacement(v.code, s.locations(after)) == nil {
			return v
		}
	}
	return nil
}
