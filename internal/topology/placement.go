package topology

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kelpfs/kelp/internal/replication"
)

// PlanOptions narrows a growth plan.
type PlanOptions struct {
	// DataCenter, when set, must be the main data center (the first copy's).
	DataCenter string
}

// Plan places the copies of one new volume. Locations[0] is the main copy;
// then the other servers of the main rack, the other racks of the main data
// center, and the other data centers.
type Plan struct {
	Locations []Location
}

// URLs returns the URLs of the plan's servers.
func (p Plan) URLs() []string {
	out := make([]string, len(p.Locations))
	for i, l := range p.Locations {
		out[i] = l.URL
	}
	return out
}

// PlanGrowth plans up to count new volumes with the given code, each a valid
// placement, using at most each server's free slots. It returns at least one
// plan, or an error wrapping ErrNoPlacement that says what is missing.
func (t *Topology) PlanGrowth(code replication.Code, count int, opts PlanOptions) ([]Plan, error) {
	t.mu.RLock()
	cands := make([]candidate, 0, len(t.nodes))
	var unreachable []string
	for _, n := range t.nodes {
		if !t.reachableLocked(n.info.URL) {
			unreachable = append(unreachable, t.describeUnreachable(n))
			continue
		}
		cands = append(cands, candidate{loc: n.location(), free: n.freeSlots()})
	}
	lost := t.recentlyLostLocked(maxLostNamed)
	t.mu.RUnlock()
	plans, err := planGrowth(cands, code, count, opts)
	if err != nil && len(unreachable) > 0 {
		slices.Sort(unreachable)
		err = fmt.Errorf("%w (not counted: %d volume servers that cannot be reached or whose heartbeat stream broke: %s)",
			err, len(unreachable), strings.Join(unreachable, "; "))
	}
	if err != nil && len(lost) > 0 {
		err = fmt.Errorf("%w (lost, latest first: %s)", err, strings.Join(lost, "; "))
	}
	return plans, err
}

// maxLostNamed bounds how many lost servers a refusal names.
const maxLostNamed = 8

// recentlyLostLocked describes up to n of the servers dropped from the
// topology that have not returned, the latest first: what a placement that
// fails may be missing. The caller holds mu.
func (t *Topology) recentlyLostLocked(n int) []string {
	urls := slices.Collect(maps.Keys(t.lost))
	slices.SortFunc(urls, func(a, b string) int {
		return cmp.Or(t.lost[b].at.Compare(t.lost[a].at), cmp.Compare(a, b))
	})
	var out []string
	for _, u := range urls[:min(n, len(urls))] {
		l := t.lost[u]
		out = append(out, fmt.Sprintf("%s (data center %s) at %s: %s", u, l.dc, l.at.UTC().Format(time.RFC3339), l.cause))
	}
	return out
}

// DisksWithRoom counts the disks that can take a new volume, in data center
// dc ("" for all).
func (t *Topology) DisksWithRoom(dc string) int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n := 0
	for _, node := range t.nodes {
		if (dc != "" && node.info.DataCenter != dc) || !t.reachableLocked(node.info.URL) {
			continue
		}
		for i := range node.info.Disks {
			if node.info.Disks[i].freeSlots() > 0 {
				n++
			}
		}
	}
	return n
}

// candidate is a server and its free volume slots, the only facts placement
// looks at.
type candidate struct {
	loc  Location
	free int
}

func planGrowth(cands []candidate, code replication.Code, count int, opts PlanOptions) ([]Plan, error) {
	if count <= 0 {
		count = 1
	}
	// Deterministic order, independent of map iteration.
	slices.SortFunc(cands, func(a, b candidate) int { return cmp.Compare(a.loc.URL, b.loc.URL) })
	free := make([]int, len(cands))
	for i := range cands {
		free[i] = cands[i].free
	}
	var plans []Plan
	for len(plans) < count {
		idx := planOne(cands, free, code, opts.DataCenter)
		if idx == nil {
			break
		}
		p := Plan{Locations: make([]Location, len(idx))}
		for i, j := range idx {
			p.Locations[i] = cands[j].loc
			free[j]--
		}
		plans = append(plans, p)
	}
	if len(plans) == 0 {
		return nil, diagnose(cands, code, opts.DataCenter)
	}
	return plans, nil
}

// group is the candidates with free slots, by data center and rack, each
// level sorted most free first (ties by name), servers as indices into cands.
type dcGroup struct {
	name  string
	free  int
	racks []rackGroup
}

type rackGroup struct {
	name    string
	free    int
	servers []int
}

func groupFree(cands []candidate, free []int) []dcGroup {
	byDC := map[string]map[string][]int{}
	for i, c := range cands {
		if free[i] <= 0 {
			continue
		}
		if byDC[c.loc.DataCenter] == nil {
			byDC[c.loc.DataCenter] = map[string][]int{}
		}
		byDC[c.loc.DataCenter][c.loc.Rack] = append(byDC[c.loc.DataCenter][c.loc.Rack], i)
	}
	var dcs []dcGroup
	for dn, racks := range byDC {
		d := dcGroup{name: dn}
		for rn, servers := range racks {
			r := rackGroup{name: rn, servers: servers}
			slices.SortFunc(r.servers, func(a, b int) int {
				return cmp.Or(cmp.Compare(free[b], free[a]), cmp.Compare(cands[a].loc.URL, cands[b].loc.URL))
			})
			for _, s := range servers {
				r.free += free[s]
			}
			d.free += r.free
			d.racks = append(d.racks, r)
		}
		slices.SortFunc(d.racks, func(a, b rackGroup) int { return cmp.Or(cmp.Compare(b.free, a.free), cmp.Compare(a.name, b.name)) })
		dcs = append(dcs, d)
	}
	slices.SortFunc(dcs, func(a, b dcGroup) int { return cmp.Or(cmp.Compare(b.free, a.free), cmp.Compare(a.name, b.name)) })
	return dcs
}

// planOne returns the candidate indices for one volume, main copy first, or
// nil. It tries every (main data center, main rack) pair, so it finds a
// placement whenever one exists: the three groups of copies (main rack, other
// racks, other data centers) never compete for the same server.
func planOne(cands []candidate, free []int, code replication.Code, wantDC string) []int {
	x, y, z := int(code.DiffDataCenter), int(code.DiffRack), int(code.SameRack)
	dcs := groupFree(cands, free)
	best := func(servers []int) int { return servers[0] } // sorted most free first
	for di, d := range dcs {
		if wantDC != "" && d.name != wantDC {
			continue
		}
		if len(dcs)-1 < x {
			return nil
		}
		for ri, r := range d.racks {
			if len(r.servers) < z+1 || len(d.racks)-1 < y {
				continue
			}
			out := slices.Clone(r.servers[:z+1])
			out = append(out, pickOnePerGroup(d.racks, ri, y, free, best)...)
			var others []rackGroup
			for dj, od := range dcs {
				if dj != di {
					// A data center's best server is the best of its best rack's
					// servers, which may not be its first rack's first server.
					all := rackGroup{name: od.name}
					for _, rr := range od.racks {
						all.servers = append(all.servers, rr.servers...)
					}
					slices.SortFunc(all.servers, func(a, b int) int {
						return cmp.Or(cmp.Compare(free[b], free[a]), cmp.Compare(cands[a].loc.URL, cands[b].loc.URL))
					})
					others = append(others, all)
				}
			}
			out = append(out, pickOnePerGroup(others, -1, x, free, best)...)
			return out
		}
	}
	return nil
}

// pickOnePerGroup takes the best server of the n groups (skipping index skip)
// whose best server has the most free slots.
func pickOnePerGroup(groups []rackGroup, skip, n int, free []int, best func([]int) int) []int {
	var picks []int
	for i, g := range groups {
		if i != skip {
			picks = append(picks, best(g.servers))
		}
	}
	slices.SortStableFunc(picks, func(a, b int) int { return cmp.Compare(free[b], free[a]) })
	return picks[:n]
}

// diagnose explains why planOne found nothing, naming the first unmet need.
func diagnose(cands []candidate, code replication.Code, wantDC string) error {
	x, y, z := int(code.DiffDataCenter), int(code.DiffRack), int(code.SameRack)
	if len(cands) == 0 {
		return fmt.Errorf("%w: no volume servers are connected", ErrNoPlacement)
	}
	free := make([]int, len(cands))
	for i := range cands {
		free[i] = cands[i].free
	}
	dcs := groupFree(cands, free)
	if len(dcs) == 0 {
		return fmt.Errorf("%w: none of the %d volume servers has a free volume slot", ErrNoPlacement, len(cands))
	}
	scope := dcs
	if wantDC != "" {
		i := slices.IndexFunc(dcs, func(d dcGroup) bool { return d.name == wantDC })
		if i < 0 {
			return fmt.Errorf("%w: data center %q has no volume server with a free slot", ErrNoPlacement, wantDC)
		}
		scope = dcs[i : i+1]
	}
	if len(dcs) < x+1 {
		names := make([]string, len(dcs))
		for i, d := range dcs {
			names[i] = d.name
		}
		verb := "have them"
		if len(names) == 1 {
			verb = "has one"
		}
		return fmt.Errorf("%w: replication %s needs %d data centers with free slots; only %s %s",
			ErrNoPlacement, code, x+1, strings.Join(names, ", "), verb)
	}
	maxRacks, maxRacksDC := 0, ""
	maxServers, maxServersAt := 0, ""
	for _, d := range scope {
		if len(d.racks) > maxRacks {
			maxRacks, maxRacksDC = len(d.racks), d.name
		}
		for _, r := range d.racks {
			if len(r.servers) > maxServers {
				maxServers, maxServersAt = len(r.servers), d.name+"/"+r.name
			}
		}
	}
	if maxRacks < y+1 {
		return fmt.Errorf("%w: replication %s needs %d racks with free slots in one data center; the most is %d (in %s)",
			ErrNoPlacement, code, y+1, maxRacks, maxRacksDC)
	}
	if maxServers < z+1 {
		return fmt.Errorf("%w: replication %s needs %d servers with free slots in one rack; the most is %d (in %s)",
			ErrNoPlacement, code, z+1, maxServers, maxServersAt)
	}
	return fmt.Errorf("%w: replication %s: no data center has a rack with %d servers with free slots, %d other racks with free slots and %d other data centers with free slots",
		ErrNoPlacement, code, z+1, y, x)
}

// PlanShortGrowth is PlanGrowth for a collection under the degraded write
// policy when the full code cannot be placed (a data center is down): it
// places fewer copies, at least minCopies, dropping copies in other data
// centers first, then in other racks, then in the same rack, and returns
// the reduced code the plans follow. The volumes keep their full code; the
// master records them as under-replicated (NoteGrownShort) and places the
// missing copies once the servers to hold them are back.
func (t *Topology) PlanShortGrowth(code replication.Code, count, minCopies int, opts PlanOptions) ([]Plan, replication.Code, error) {
	var reduced []replication.Code
	for x := int(code.DiffDataCenter); x >= 0; x-- {
		for y := int(code.DiffRack); y >= 0; y-- {
			for z := int(code.SameRack); z >= 0; z-- {
				c := replication.Code{DiffDataCenter: uint8(x), DiffRack: uint8(y), SameRack: uint8(z)}
				if c != code && c.Copies() >= max(1, minCopies) {
					reduced = append(reduced, c)
				}
			}
		}
	}
	// Most copies first; among as many, the one that keeps the most data
	// centers, then racks (the loop order above, kept by a stable sort).
	slices.SortStableFunc(reduced, func(a, b replication.Code) int { return cmp.Compare(b.Copies(), a.Copies()) })
	err := fmt.Errorf("%w: not even %d copies of code %s can be placed", ErrNoPlacement, max(1, minCopies), code)
	for _, c := range reduced {
		plans, perr := t.PlanGrowth(c, count, opts)
		if perr == nil {
			return plans, c, nil
		}
		err = perr
	}
	return nil, replication.Code{}, err
}
