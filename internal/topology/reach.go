package topology

import (
	"fmt"
	"slices"
	"time"
)

// unreachableMark records that the master could not reach a node at its
// advertised address although the node still sends heartbeats (a volume
// server bound to an address it no longer has, a one-way network cut). Marks
// live beside the nodes, not in them, because a node's state is replaced on
// every heartbeat, and heartbeats say nothing about whether the node can be
// reached.
type unreachableMark struct {
	since time.Time
	cause string
	// streamLost: set by HeartbeatLost, not by a probe. Only a heartbeat
	// from the node ends it (UpdateNode), never a probe that succeeds: a
	// probe that started before the node died may answer after its stream
	// broke, and the node's process is what must prove itself alive.
	streamLost bool
}

// SetReachable records the outcome of the caller's reachability probe of the
// node at url, as of now, and reports whether the node's state changed (so
// that the caller logs transitions, not every probe). An unreachable node
// still counts as alive, but its copies count as missing: no volume with a
// copy on it is writable, and PlanGrowth never places a copy on it. Unknown
// nodes are ignored.
func (t *Topology) SetReachable(url string, reachable bool, cause string, now time.Time) (changed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.nodes[url]
	if n == nil {
		return false
	}
	m, was := t.unreachable[url]
	if m.streamLost {
		// The node's heartbeat stream broke: its next heartbeat, not a
		// probe, says it is back (see unreachableMark).
		return false
	}
	if reachable == !was {
		if !reachable {
			m.cause = cause // the latest reason is the useful one
			t.unreachable[url] = m
		}
		return false
	}
	if reachable {
		delete(t.unreachable, url)
	} else {
		t.unreachable[url] = unreachableMark{since: now, cause: cause}
	}
	t.refreshNodeLayouts(n)
	return true
}

// HeartbeatLost records that the heartbeat stream of the node at url broke
// (not a clean end) at now. A killed process's connections are closed by its
// kernel, so the master sees its stream break at once, long before the dead
// timeout: from now on the node counts as unreachable (its copies as missing,
// no assign names it, placement skips it) until it is heard from again
// (UpdateNode), or dropped by ExpireNodes. It reports whether the node's
// state changed; unknown nodes are ignored.
func (t *Topology) HeartbeatLost(url, cause string, now time.Time) (changed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.nodes[url]
	if n == nil {
		return false
	}
	m, was := t.unreachable[url]
	if was && m.streamLost {
		return false
	}
	t.unreachable[url] = unreachableMark{since: now, cause: cause, streamLost: true}
	if !was {
		t.refreshNodeLayouts(n)
	}
	return true
}

// ClearHeartbeatLost ends a HeartbeatLost mark of the node at url, for a
// caller that knows the node is heard from again by other means than
// UpdateNode (a new stream opened). Probe marks stay.
func (t *Topology) ClearHeartbeatLost(url string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.nodes[url]
	if m, ok := t.unreachable[url]; n == nil || !ok || !m.streamLost {
		return
	}
	delete(t.unreachable, url)
	t.refreshNodeLayouts(n)
}

// refreshNodeLayouts recomputes the layouts of the volumes on n. The caller
// holds mu for writing.
func (t *Topology) refreshNodeLayouts(n *node) {
	affected := map[LayoutKey]bool{}
	for di := range n.info.Disks {
		for _, v := range n.info.Disks[di].Volumes {
			if e := t.volumes[v.ID]; e != nil {
				affected[e.key] = true
			}
		}
	}
	for k := range affected {
		t.refreshLayout(k)
	}
}

// Unreachable lists the URLs of the nodes marked unreachable, sorted.
func (t *Topology) Unreachable() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]string, 0, len(t.unreachable))
	for url := range t.unreachable {
		out = append(out, url)
	}
	slices.Sort(out)
	return out
}

// reachableLocked reports whether the node at url is not marked unreachable.
// The caller holds mu.
func (t *Topology) reachableLocked(url string) bool {
	if len(t.unreachable) == 0 {
		return true
	}
	_, bad := t.unreachable[url]
	return !bad
}

// describeUnreachable names a node marked unreachable, its data center and
// why, for refusals. The caller holds mu.
func (t *Topology) describeUnreachable(n *node) string {
	m := t.unreachable[n.info.URL]
	what := "unreachable"
	if m.streamLost {
		what = "heartbeat stream broke"
	}
	if m.cause != "" {
		what += ": " + m.cause
	}
	return fmt.Sprintf("%s (data center %s) %s", n.info.URL, n.info.DataCenter, what)
}
