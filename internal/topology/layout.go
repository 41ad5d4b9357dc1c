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
		first := 0
		if dataCenter != "" {
			first = slices.IndexFunc(e.copies, func(c volumeCopy) bool { return c.node.info.DataCenter == dataCenter })
			if first < 0 {
				continue
			}
		} else if len(e.copies) > 1 {
			// Spread the writes of a replicated volume over its copies.
			first = t.intn(len(e.copies))
		}
		if d := t.deficits[vid]; d != nil {
			// Under-replicated: the client writes to a good, reachable copy.
			first = t.pickGood(e, d, dataCenter)
			if first < 0 {
				continue
			}
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
