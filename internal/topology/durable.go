package topology

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// DeficitRecord is the part of a deficit that outlives a leader: since when
// and why the volume is under-replicated, and which copies (volume server
// URLs, sorted) hold every acknowledged write. The master keeps these
// records in raft (see internal/master, deficits.go); progress counters are
// the leader's own.
type DeficitRecord struct {
	Since time.Time
	Cause string
	Good  []string
}

// DeficitRecords returns the deficit table, volumes whose copies no server
// reports yet included.
func (t *Topology) DeficitRecords() map[uint32]DeficitRecord {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[uint32]DeficitRecord, len(t.deficits))
	for vid, d := range t.deficits {
		out[vid] = DeficitRecord{Since: d.since, Cause: d.cause, Good: slices.Clone(d.good)}
	}
	return out
}

// AdoptDeficits makes recs the deficit table: a newly elected leader takes
// its predecessor's records, which know which present copies missed writes
// (this master's own view, mirrored from the old leader, does not). Deficits
// of this master's own that recs do not have are dropped; the volumes short
// of copies get theirs back at once (writableDegraded). An adopted record
// waits for one of its good copies: until one reports, no copy of the
// volume is taken for good (a behind copy that reports first must not
// become the one the others are healed from), and the volume takes no writes.
func (t *Topology) AdoptDeficits(recs map[uint32]DeficitRecord) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.deficits = make(map[uint32]*deficit, len(recs))
	for vid, r := range recs {
		d := &deficit{since: r.Since, cause: r.Cause, good: slices.Clone(r.Good)}
		slices.Sort(d.good)
		e := t.volumes[vid]
		if e == nil || !t.hasGoodCopyLocked(e, d) {
			d.waiting, d.waitingSince = true, time.Now()
		}
		t.deficits[vid] = d
	}
	for k := range t.layouts {
		t.refreshLayout(k)
	}
}

// hasGoodCopyLocked reports whether one of d's good copies is among e's.
func (t *Topology) hasGoodCopyLocked(e *volumeEntry, d *deficit) bool {
	return slices.ContainsFunc(e.copies, func(c volumeCopy) bool { return slices.Contains(d.good, c.node.info.URL) })
}

// AdoptPresentCopies ends the waits for a good copy that began more than
// after before now: the good copies are taken for lost, and the present
// copies of the volume become good (the cause says so), so that the volume
// takes writes again and its missing copies are replaced from them. Writes
// that only the lost copies held are then lost unless those copies return
// and volume.fix.replication reports the divergence. It returns the
// volumes it changed.
func (t *Topology) AdoptPresentCopies(now time.Time, after time.Duration) []uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []uint32
	for vid, d := range t.deficits {
		e := t.volumes[vid]
		if !d.waiting || e == nil || len(e.copies) == 0 || now.Sub(d.waitingSince) <= after {
			continue
		}
		lost := d.good
		d.good = nil
		for _, c := range e.copies {
			d.good = append(d.good, c.node.info.URL)
		}
		d.waiting, d.waitingSince = false, time.Time{}
		d.epoch++
		d.cause += fmt.Sprintf("; no copy known to hold every write (%s) returned within %s: the present copies were adopted", strings.Join(lost, ", "), after)
		t.refreshLayout(e.key)
		out = append(out, vid)
	}
	slices.Sort(out)
	return out
}

// dropPresenceDeficit ends the deficit of a freshly allocated volume that
// was only made because one copy's heartbeat showed the volume before the
// others were registered: an empty volume misses no write. The caller
// holds mu for writing.
func (t *Topology) dropPresenceDeficit(vid uint32) {
	if d := t.deficits[vid]; d != nil && d.presence {
		delete(t.deficits, vid)
	}
}
