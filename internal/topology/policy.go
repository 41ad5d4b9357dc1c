package topology

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// WritePolicy says what a write needs when copies of its volume are missing.
//
// Strict (the zero value): every copy the replication code asks for must be
// present, reachable and caught up; a write is acknowledged only when every
// copy has it, and a volume short of a copy takes no writes (the assign
// answers 503 naming what is missing).
//
// Degraded: a volume takes writes while at least MinCopies of its copies
// hold every acknowledged write and are reachable; the volume server
// acknowledges a write once MinCopies copies have it. The master records the
// volume as under-replicated (Deficits) and brings the missing copies back by
// itself once their servers return (or replacements join).
type WritePolicy struct {
	Degraded  bool
	MinCopies int // degraded only; at least 1
}

// ParseWritePolicy reads "strict", "degraded" or "degraded:N" (the stored
// form, N = MinCopies). minCopies, when not 0, overrides N; it is an error
// with strict.
func ParseWritePolicy(s string, minCopies int) (WritePolicy, error) {
	mode, n, hasN := strings.Cut(s, ":")
	switch mode {
	case "", "strict":
		if hasN || minCopies != 0 {
			return WritePolicy{}, fmt.Errorf("write policy %q: minCopies applies to degraded only", s)
		}
		return WritePolicy{}, nil
	case "degraded":
		p := WritePolicy{Degraded: true, MinCopies: 1}
		if hasN {
			v, err := strconv.Atoi(n)
			if err != nil || v < 1 {
				return WritePolicy{}, fmt.Errorf("write policy %q: minCopies must be a number of at least 1", s)
			}
			p.MinCopies = v
		}
		if minCopies < 0 {
			return WritePolicy{}, fmt.Errorf("write policy %q: minCopies %d must be at least 1", s, minCopies)
		}
		if minCopies > 0 {
			p.MinCopies = minCopies
		}
		return p, nil
	}
	return WritePolicy{}, fmt.Errorf("write policy %q: want strict or degraded", s)
}

// String is the stored form: "strict" or "degraded:N".
func (p WritePolicy) String() string {
	if !p.Degraded {
		return "strict"
	}
	return "degraded:" + strconv.Itoa(max(1, p.MinCopies))
}

// minCopies is how many good copies a write of a volume with copies copies
// needs under p.
func (p WritePolicy) minCopies(copies int) int {
	if !p.Degraded {
		return copies
	}
	return min(copies, max(1, p.MinCopies))
}

// SetWritePolicies replaces the write policies (by collection, "" = the
// cluster default; stored forms, unreadable ones count as strict) and
// recomputes which volumes are writable.
func (t *Topology) SetWritePolicies(byCollection map[string]string) {
	ps := make(map[string]WritePolicy, len(byCollection))
	for c, s := range byCollection {
		if p, err := ParseWritePolicy(s, 0); err == nil && p.Degraded {
			ps[c] = p
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if maps.Equal(ps, t.policies) {
		return
	}
	t.policies = ps
	for k := range t.layouts {
		t.refreshLayout(k)
	}
}

// WritePolicyFor returns the write policy of a collection.
func (t *Topology) WritePolicyFor(collection string) WritePolicy {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.policyLocked(collection)
}

func (t *Topology) policyLocked(collection string) WritePolicy {
	if p, ok := t.policies[collection]; ok {
		return p
	}
	return t.policies[""]
}

// deficit records that a volume may lack acknowledged writes on some of its
// copies: since a copy was lost, cut off or failed a write, only the copies
// in good are known to hold every write. Other copies that are (or come
// back) present are behind: the master catches them up (the needles they
// miss, not the whole volume) and adds them to good. A deficit ends when the
// volume has all its copies and every one is good. Deficits live beside the
// volume entries, like failure marks; the leader keeps them in raft too
// (DeficitRecords, AdoptDeficits).
type deficit struct {
	since time.Time
	cause string
	good  []string // sorted URLs
	// waiting: none of the good copies is present (adopted from raft and
	// none has reported since, see AdoptDeficits, or every good copy was
	// lost); good is kept as it is until one returns, and the volume takes
	// no writes meanwhile. waitingSince is when the wait began
	// (AdoptPresentCopies ends a wait that lasts too long).
	waiting      bool
	waitingSince time.Time
	// presence: made only because copies were absent when this master
	// looked (writableDegraded), not because any copy is known to have
	// missed a write; a fresh volume's registration ends it.
	presence bool
	// grown: the volume was created with fewer copies than its code asks
	// for (PlanShortGrowth); the missing copies never existed, so they are
	// placed as soon as servers for them are back, not after ReplaceAfter.
	grown bool
	// epoch counts the changes that made a copy miss writes; a catch-up
	// pass that began in an older epoch makes no copy good (CaughtUpSince).
	epoch uint64
	// progress of the last catch-up, for status pages
	lastSync time.Time
	lastErr  string
	copied   uint64 // needles copied (and deletes applied) so far
}

// VolumeDeficit describes an under-replicated volume, for status pages and
// for the master's healing loop.
type VolumeDeficit struct {
	VolumeID   uint32    `json:"volumeId"`
	Collection string    `json:"collection,omitempty"`
	Since      time.Time `json:"since"`
	Cause      string    `json:"cause"`
	// Want is how many copies the replication code asks for, Good how many
	// hold every acknowledged write.
	Want int      `json:"want"`
	Good []string `json:"good"`
	// Behind are present copies that must catch up; Missing = Want minus the
	// copies present.
	Behind  []Location `json:"behind,omitempty"`
	Missing int        `json:"missing"`
	Copied  uint64     `json:"copied"`
	LastErr string     `json:"lastError,omitempty"`
	// GrownShort: created with fewer copies than the code asks for while
	// servers were missing; the missing copies are placed as soon as they
	// can be.
	GrownShort bool `json:"grownShort,omitempty"`
	// Epoch is passed back to CaughtUpSince by a catch-up started from
	// this description.
	Epoch uint64 `json:"-"`
	// Waiting: no copy known to hold every write has reported to this
	// master yet (it was elected or restarted moments ago); nothing is
	// healed until one does.
	Waiting bool `json:"waitingForGoodCopy,omitempty"`
}

// markDeficitLocked records that the copies of e for which drop is true may
// lack writes from now on. A new deficit starts with the other copies as
// good; an existing one loses the dropped copies from its
// good ones. The caller holds mu for writing.
func (t *Topology) markDeficitLocked(vid uint32, e *volumeEntry, drop func(c volumeCopy) bool, cause string, now time.Time) {
	if d := t.deficits[vid]; d != nil {
		d.cause = cause
		d.epoch++
		d.presence = false
		if d.waiting {
			// The good copies have not reported yet: what they are
			// stays what the predecessor committed.
			return
		}
		good := slices.DeleteFunc(slices.Clone(d.good), func(u string) bool {
			i := slices.IndexFunc(e.copies, func(c volumeCopy) bool { return c.node.info.URL == u })
			return i < 0 || drop(e.copies[i])
		})
		if len(good) == 0 {
			// No present copy would be known to hold every write (a write
			// reached only a copy that is gone since): keep the present good
			// ones rather than leave the volume with nothing to heal from.
			good = slices.DeleteFunc(d.good, func(u string) bool {
				return !slices.ContainsFunc(e.copies, func(c volumeCopy) bool { return c.node.info.URL == u })
			})
		}
		d.good = good
		return
	}
	var good []string
	for _, c := range e.copies {
		// An unreachable copy counts as good too: it takes no writes while
		// unreachable, and a write that failed to reach it is reported.
		if !drop(c) {
			good = append(good, c.node.info.URL)
		}
	}
	t.deficits[vid] = &deficit{since: now, cause: cause, good: good}
}

// CaughtUp records that the copy at url holds every write its good copies
// held when a catch-up that started at started began; n needles were copied.
// The copy becomes good only when that pass copied nothing (so that writes
// that raced the pass are not lost); the deficit ends once every copy is
// good. It reports whether the copy became good.
func (t *Topology) CaughtUp(vid uint32, url string, copied uint64, syncErr error, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.deficits[vid]
	if d == nil {
		return false
	}
	return t.caughtUpLocked(vid, url, d.epoch, copied, syncErr, now)
}

// CaughtUpSince is CaughtUp for a pass that began when the deficit was in
// epoch (VolumeDeficit.Epoch): if a copy was reported to have missed a
// write since, the pass may have compared against a good copy that did not
// hold that write yet, and the copy does not become good.
func (t *Topology) CaughtUpSince(vid uint32, url string, epoch, copied uint64, syncErr error, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.caughtUpLocked(vid, url, epoch, copied, syncErr, now)
}

func (t *Topology) caughtUpLocked(vid uint32, url string, epoch, copied uint64, syncErr error, now time.Time) bool {
	d := t.deficits[vid]
	e := t.volumes[vid]
	if d == nil || e == nil {
		return false
	}
	d.lastSync = now
	d.copied += copied
	if syncErr != nil {
		d.lastErr = syncErr.Error()
		return false
	}
	d.lastErr = ""
	if copied > 0 || d.epoch != epoch || d.waiting || !slices.ContainsFunc(e.copies, func(c volumeCopy) bool { return c.node.info.URL == url }) {
		return false
	}
	if !slices.Contains(d.good, url) {
		d.good = append(d.good, url)
		slices.Sort(d.good)
	}
	t.settleLocked(vid, e)
	t.refreshLayout(e.key)
	return true
}

// settleLocked ends the deficit of a volume that has all its copies, every
// one good.
func (t *Topology) settleLocked(vid uint32, e *volumeEntry) {
	d := t.deficits[vid]
	if d == nil || len(e.copies) < e.key.Replication.Copies() {
		return
	}
	for _, c := range e.copies {
		if !slices.Contains(d.good, c.node.info.URL) {
			return
		}
	}
	delete(t.deficits, vid)
	delete(t.failures, vid)
}

// goodCopy reports whether copy c of volume vid holds every acknowledged write.
func (t *Topology) goodCopy(vid uint32, c volumeCopy) bool {
	d := t.deficits[vid]
	return d == nil || slices.Contains(d.good, c.node.info.URL)
}

// Deficits lists the under-replicated volumes, sorted by volume id.
func (t *Topology) Deficits() []VolumeDeficit {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]VolumeDeficit, 0, len(t.deficits))
	for vid, d := range t.deficits {
		e := t.volumes[vid]
		if e == nil {
			continue
		}
		vd := VolumeDeficit{
			VolumeID: vid, Collection: e.key.Collection, Since: d.since, Cause: d.cause,
			Want: e.key.Replication.Copies(), Good: slices.Clone(d.good), Copied: d.copied, LastErr: d.lastErr,
			Waiting: d.waiting, Epoch: d.epoch, GrownShort: d.grown,
		}
		for _, c := range e.copies {
			if !slices.Contains(d.good, c.node.info.URL) && t.reachableLocked(c.node.info.URL) {
				vd.Behind = append(vd.Behind, c.node.location())
			}
		}
		vd.Missing = max(0, vd.Want-len(e.copies))
		out = append(out, vd)
	}
	slices.SortFunc(out, func(a, b VolumeDeficit) int { return cmp.Compare(a.VolumeID, b.VolumeID) })
	return out
}

// dropStaleDeficits forgets deficits of volumes no node reports any more.
func (t *Topology) dropStaleDeficits() {
	for vid := range t.deficits {
		if t.volumes[vid] == nil {
			delete(t.deficits, vid)
		}
	}
}

// markLostLocked records, for the degraded volumes with a copy on n, that n's
// copy no longer counts as good. The caller holds mu for writing.
func (t *Topology) markLostLocked(n *node, cause string, now time.Time) {
	for di := range n.info.Disks {
		for _, v := range n.info.Disks[di].Volumes {
			e := t.volumes[v.ID]
			if e == nil || !t.policyLocked(e.key.Collection).Degraded {
				continue
			}
			t.markDeficitLocked(v.ID, e, func(c volumeCopy) bool { return c.node == n }, cause, now)
		}
	}
}

// writableDegraded is writable for a volume of a degraded collection: at
// least MinCopies good, reachable copies, none of the copies full or
// read-only. A volume short of copies gets a deficit here if it has none yet
// (its copies were lost before the policy applied, or at start-up), and a
// good copy that is gone stops being good.
func (t *Topology) writableDegraded(e *volumeEntry, p WritePolicy) bool {
	vid := e.copies[0].vol.ID
	want := e.key.Replication.Copies()
	present := func(c volumeCopy) bool { return t.reachableLocked(c.node.info.URL) }
	d := t.deficits[vid]
	if d == nil {
		short := len(e.copies) < want || !slices.ContainsFunc(e.copies, present) ||
			slices.ContainsFunc(e.copies, func(c volumeCopy) bool { return !present(c) })
		if short {
			var urls []string
			for _, c := range e.copies {
				if present(c) {
					urls = append(urls, c.node.info.URL)
				}
			}
			cause := fmt.Sprintf("%d of %d copies reachable (%s)", len(urls), want, strings.Join(urls, ", "))
			t.markDeficitLocked(vid, e, func(volumeCopy) bool { return false }, cause, time.Now())
			d = t.deficits[vid]
			d.presence = true
		}
	} else if !t.hasGoodCopyLocked(e, d) {
		// Every copy known to hold every acknowledged write is gone (or
		// has not reported to this master yet): the present copies miss
		// some of them. Taking one of those for good would serve reads
		// without those writes and heal the good copies' return from it,
		// so good stays as it is and the volume waits for one of them
		// (AdoptPresentCopies gives up after a while).
		if !d.waiting {
			d.waiting, d.waitingSince = true, time.Now()
		}
		return false
	} else {
		d.waiting, d.waitingSince = false, time.Time{}
		// A good copy that is gone stops being good (it may come back having
		// missed writes). One that is only unreachable for a while stays
		// good: it takes no writes meanwhile, and a write whose forward to
		// it failed is reported (ReportFailure), which is what demotes it.
		d.good = slices.DeleteFunc(d.good, func(u string) bool {
			return !slices.ContainsFunc(e.copies, func(c volumeCopy) bool { return c.node.info.URL == u })
		})
		t.settleLocked(vid, e)
		d = t.deficits[vid]
	}
	good := 0
	for _, c := range e.copies {
		if c.vol.ReadOnly || (t.sizeLimit > 0 && c.vol.Size >= t.sizeLimit) {
			return false
		}
		if present(c) && (d == nil || slices.Contains(d.good, c.node.info.URL)) {
			good++
		}
	}
	return good >= p.minCopies(want)
}

// VolumeMinCopies is the copies a write to the volume needs before it is
// acknowledged: 0 under the strict policy (every copy), else the degraded
// policy's MinCopies, at most the copies its code asks for.
func (t *Topology) VolumeMinCopies(vid uint32) int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	e := t.volumes[vid]
	if e == nil {
		return 0
	}
	p := t.policyLocked(e.key.Collection)
	if !p.Degraded {
		return 0
	}
	return p.minCopies(e.key.Replication.Copies())
}

// lostNode is a node dropped from the topology and the volumes it held.
type lostNode struct {
	dc, rack string
	at       time.Time
	cause    string
	vids     []uint32
}

// maxLost bounds how many lost nodes are remembered.
const maxLost = 4096

func (t *Topology) rememberLost(n *node, cause string, now time.Time) {
	if len(t.lost) >= maxLost {
		return
	}
	l := lostNode{dc: n.info.DataCenter, rack: n.info.Rack, at: now, cause: cause}
	for di := range n.info.Disks {
		for _, v := range n.info.Disks[di].Volumes {
			l.vids = append(l.vids, v.ID)
		}
	}
	t.lost[n.info.URL] = l
}

// ExplainUnwritable says why the volumes of a layout take no writes because
// copies are missing: which servers, in which data centers, were lost or
// cannot be reached. It returns "" when no copy is missing.
func (t *Topology) ExplainUnwritable(k LayoutKey) string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	l := t.layouts[k]
	if l == nil {
		return ""
	}
	missing := map[string]string{} // url -> description
	dcs := map[string]bool{}
	for vid := range l.vids {
		e := t.volumes[vid]
		if e == nil {
			continue
		}
		for _, c := range e.copies {
			if !t.reachableLocked(c.node.info.URL) {
				missing[c.node.info.URL] = t.describeUnreachable(c.node)
				dcs[c.node.info.DataCenter] = true
			}
		}
		if len(e.copies) >= e.key.Replication.Copies() {
			continue
		}
		for url, ln := range t.lost {
			if slices.Contains(ln.vids, vid) {
				missing[url] = fmt.Sprintf("%s (data center %s) lost %s ago: %s", url, ln.dc, time.Since(ln.at).Round(time.Second), ln.cause)
				dcs[ln.dc] = true
			}
		}
	}
	if len(missing) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("copies missing in data center")
	if len(dcs) > 1 {
		b.WriteString("s")
	}
	b.WriteString(" " + strings.Join(slices.Sorted(maps.Keys(dcs)), ", ") + ": ")
	for i, u := range slices.Sorted(maps.Keys(missing)) {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(missing[u])
	}
	return b.String()
}

// ReportDegradedWrite records that a write to a degraded-policy volume was
// acknowledged with only the copies at written: every other copy of the
// volume lacks it until caught up.
func (t *Topology) ReportDegradedWrite(volumeID uint32, written []string, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.volumes[volumeID]
	if e == nil {
		return fmt.Errorf("%w: volume %d", ErrVolumeNotFound, volumeID)
	}
	if !t.policyLocked(e.key.Collection).Degraded {
		return nil
	}
	// Once a volume is short, only its good copies may acknowledge short
	// writes. Between a first short write and its record, the other side
	// of a partition between the copies may take short writes too: had
	// both been acknowledged, each side would hold writes the other lacks,
	// and a catch-up from the good side would never copy the other's.
	if d := t.deficits[volumeID]; d != nil && !slices.ContainsFunc(written, func(u string) bool { return slices.Contains(d.good, u) }) {
		return fmt.Errorf("%w: volume %d, written to %s, good copies %s", ErrBehindCopy, volumeID,
			strings.Join(written, ", "), strings.Join(d.good, ", "))
	}
	missed := func(c volumeCopy) bool { return !slices.Contains(written, c.node.info.URL) }
	if t.deficits[volumeID] != nil || slices.ContainsFunc(e.copies, missed) || len(e.copies) < e.key.Replication.Copies() {
		t.markDeficitLocked(volumeID, e, missed, fmt.Sprintf("a write reached only %s", strings.Join(written, ", ")), now)
		t.refreshLayout(e.key)
	}
	return nil
}

// NoteGrownShort records that volume vid was just created with fewer copies
// than its code asks for (PlanShortGrowth): it is under-replicated from the
// start, its copies are all good, and the missing ones are to be placed as
// soon as servers for them are back.
func (t *Topology) NoteGrownShort(vid uint32, why string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.volumes[vid]
	if e == nil || !t.policyLocked(e.key.Collection).Degraded {
		return
	}
	d := t.deficits[vid]
	if d == nil {
		t.markDeficitLocked(vid, e, func(volumeCopy) bool { return false }, "", now)
		d = t.deficits[vid]
	}
	d.grown, d.presence = true, false
	d.cause = fmt.Sprintf("created with %d of %d copies: %s", len(e.copies), e.key.Replication.Copies(), why)
	t.refreshLayout(e.key)
}
