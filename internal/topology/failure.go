package topology

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// DefaultFailureCooldown is how long a volume stays out of assigns after a
// reported write failure when Options.FailureCooldown is 0.
const DefaultFailureCooldown = 10 * time.Second

// failure is a reported failed write to one copy of a volume. The volume is
// not writable while it stands. Marks live beside the volume entries, not in
// them, because an entry is rebuilt on every heartbeat of its nodes.
type failure struct {
	url   string // the copy that failed
	at    time.Time
	cause string
}

// VolumeFailure describes a volume taken out of assigns, for status pages.
type VolumeFailure struct {
	VolumeID uint32    `json:"volumeId"`
	URL      string    `json:"url"`
	At       time.Time `json:"at"`
	Error    string    `json:"error,omitempty"`
}

// ReportFailure records that a replicated write of the volume failed on the
// copy at url, as of now: the volume stops being picked for assigns until
// every copy it needs has sent a heartbeat after the failure and the cooldown
// has passed since the last report. A copy that keeps failing keeps pushing
// the cooldown forward, so a flapping copy does not bounce the volume in and
// out of service.
//
// When the copy's server was unreachable, every volume with a copy on that
// server is marked the same way: the next write to any of them would wait on
// the same dead or cut-off server.
func (t *Topology) ReportFailure(volumeID uint32, url, cause string, unreachable bool, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.volumes[volumeID]
	if e == nil {
		return fmt.Errorf("%w: volume %d", ErrVolumeNotFound, volumeID)
	}
	t.failures[volumeID] = failure{url: url, at: now, cause: cause}
	// Under a degraded policy the write may have been acknowledged without
	// that copy: it is behind until caught up.
	failed := func(c volumeCopy) bool { return c.node.info.URL == url }
	if t.policyLocked(e.key.Collection).Degraded {
		t.markDeficitLocked(volumeID, e, failed, "write failed on "+url+": "+cause, now)
	}
	t.refreshLayout(e.key)
	if !unreachable {
		return nil
	}
	for vid, other := range t.volumes {
		if vid == volumeID || !slices.ContainsFunc(other.copies, func(c volumeCopy) bool { return c.node.info.URL == url }) {
			continue
		}
		t.failures[vid] = failure{url: url, at: now, cause: "server unreachable: " + cause}
		if t.policyLocked(other.key.Collection).Degraded {
			t.markDeficitLocked(vid, other, failed, "server "+url+" unreachable: "+cause, now)
		}
		t.refreshLayout(other.key)
	}
	return nil
}

// healLocked clears the failure marks of the given volumes that are healthy
// again at now. The caller holds mu for writing and refreshes the layouts.
func (t *Topology) healLocked(vids []uint32, now time.Time, affected map[LayoutKey]bool) {
	for _, vid := range vids {
		f, ok := t.failures[vid]
		if !ok {
			continue
		}
		e := t.volumes[vid]
		if e == nil || now.Sub(f.at) < t.cooldown || len(e.copies) < e.key.Replication.Copies() {
			continue
		}
		healthy := true
		for _, c := range e.copies {
			if c.vol.ReadOnly || !c.node.lastSeen.After(f.at) {
				healthy = false
				break
			}
		}
		if healthy {
			delete(t.failures, vid)
			affected[e.key] = true
		}
	}
}

// Failures lists the volumes taken out of assigns by reported failures,
// sorted by volume id.
func (t *Topology) Failures() []VolumeFailure {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]VolumeFailure, 0, len(t.failures))
	for vid, f := range t.failures {
		out = append(out, VolumeFailure{VolumeID: vid, URL: f.url, At: f.at, Error: f.cause})
	}
	slices.SortFunc(out, func(a, b VolumeFailure) int { return cmp.Compare(a.VolumeID, b.VolumeID) })
	return out
}

// dropStaleFailures forgets marks of volumes no node reports any more.
func (t *Topology) dropStaleFailures() {
	for vid := range t.failures {
		if t.volumes[vid] == nil {
			delete(t.failures, vid)
		}
	}
}
