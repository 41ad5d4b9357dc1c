package topology

import (
	"fmt"
	"slices"
)

// layout is the set of volumes of one LayoutKey and the writable subset,
// recomputed whenever a heartbeat touches one of its volumes so that picking
// a volume for an assign is a random index into a slice.
type layout struct {
	vids     map[uint32]struct{}
	writable []uint32 // sorted, for determinism
}

func (t *Topology) refreshLayout(k LayoutKey) {
	l := t.layouts[k]
	if l == nil {
		return
	}
	if len(l.vids) == 0 {
		delete(t.layouts, k)
		return
	}
	l.writable = l.writable[:0]
	for vid := range l.vids {
		if t.writable(t.volumes[vid]) {
			l.writable = append(l.writable, vid)
		}
	}
	slices.Sort(l.writable)
}

// refreshLayoutVids is refreshLayout for a change that can only have
// changed the writability of the volumes vids (a heartbeat: the volumes of
// one node). It fixes their membership in the writable list, in
// O(len(vids)·log n) instead of a pass over every volume of the layout, which
// with a million volumes made each heartbeat hold the write lock for tens of
// milliseconds. A collection with a degraded write policy is refreshed in
// full: its writability check keeps the deficits.
func (t *Topology) refreshLayoutVids(k LayoutKey, vids []uint32) {
	l := t.layouts[k]
	if l == nil || len(l.vids) == 0 || t.policyLocked(k.Collection).Degraded {
		t.refreshLayout(k)
		return
	}
	for _, vid := range vids {
		_, member := l.vids[vid]
		want := member && t.writable(t.volumes[vid])
		i, have := slices.BinarySearch(l.writable, vid)
		switch {
		case want && !have:
			l.writable = slices.Insert(l.writable, i, vid)
		case !want && have:
			l.writable = slices.Delete(l.writable, i, i+1)
		}
	}
}

func (t *Topology) writable(e *volumeEntry) bool {
	if e == nil || len(e.copies) == 0 {
		return false
	}
	if p := t.policyLocked(e.key.Collection); p.Degraded {
		return t.writableDegraded(e, p)
	}
	if len(e.copies) < e.key.Replication.Copies() {
		return false
	}
	if _, failed := t.failures[e.copies[0].vol.ID]; failed {
		return false
	}
	for _, c := range e.copies {
		// A copy the master cannot reach is a missing copy: writes to it
		// would fail (or wait) as surely as to one that is gone.
		if !t.reachableLocked(c.node.info.URL) {
			return false
		}
		if c.vol.ReadOnly || (t.sizeLimit > 0 && c.vol.Size >= t.sizeLimit) {
			return false
		}
	}
	return true
}

// Assignment is the volume an assign writes to. Locations[0] is the copy the
// client writes to; the volume server forwards to the others.
type Assignment struct {
	VolumeID  uint32
	Locations []Location
}

// PickForAssign picks a random writable volume of the layout. With a data
// center, only volumes with a copy there qualify and that copy comes first.
// It fails with ErrNoWritableVolume when there is none.
func (t *Topology) PickForAssign(k LayoutKey, dataCenter string) (Assignment, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	l := t.layouts[k]
	if l == nil || len(l.writable) == 0 {
		return Assignment{}, fmt.Errorf("%w for %s", ErrNoWritableVolume, k)
	}
	n := len(l.writable)
	start := t.intn(n)
	for i := 0; i < n; i++ {
		vid := l.writable[(start+i)%n]
		e := t.volumes[vid]
		first := t.pickFirst(vid, e, dataCenter)
		if first < 0 {
			continue
		}
		locs := make([]Location, 0, len(e.copies))
		locs = append(locs, e.copies[first].node.location())
		for j, c := range e.copies {
			if j != first && t.reachableLocked(c.node.info.URL) {
				locs = append(locs, c.node.location())
			}
		}
		return Assignment{VolumeID: vid, Locations: locs}, nil
	}
	return Assignment{}, fmt.Errorf("%w for %s in data center %q", ErrNoWritableVolume, k, dataCenter)
}

// WritableCount returns how many writable volumes the layout has.
func (t *Topology) WritableCount(k LayoutKey) int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if l := t.layouts[k]; l != nil {
		return len(l.writable)
	}
	return 0
}

// pickFirst returns the index of the copy of volume vid the client of an
// assign writes to (in dataCenter when given), or -1 when none may take it.
// It is a random one, to spread the writes of a replicated volume over its
// copies, among those that may: reachable (a node marked unreachable or
// whose heartbeat stream broke is never named, whatever the policy) and, for
// an under-replicated volume, holding every acknowledged write. Among those
// it prefers the fresh ones (see fresh): a copy whose server fell silent is
// not handed out while another would do, so that a degraded write goes to a
// live copy even before the master has given the silent one up.
func (t *Topology) pickFirst(vid uint32, e *volumeEntry, dataCenter string) int {
	d := t.deficits[vid]
	var ok, fresh []int
	for i, c := range e.copies {
		if (dataCenter != "" && c.node.info.DataCenter != dataCenter) || !t.reachableLocked(c.node.info.URL) ||
			(d != nil && !slices.Contains(d.good, c.node.info.URL)) {
			continue
		}
		ok = append(ok, i)
		if t.fresh(c.node) {
			fresh = append(fresh, i)
		}
	}
	if len(fresh) > 0 {
		ok = fresh
	}
	if len(ok) == 0 {
		return -1
	}
	return ok[t.intn(len(ok))]
}

// fresh reports whether n was heard from within StaleAfter of the latest
// heartbeat from any node. Measured against the newest heartbeat rather than
// a clock, it stays pure, and a master that heard from nobody for a while
// (paused, just elected) finds every node equally fresh.
func (t *Topology) fresh(n *node) bool {
	return t.staleAfter <= 0 || !n.lastSeen.Before(t.newestSeen.Add(-t.staleAfter))
}
