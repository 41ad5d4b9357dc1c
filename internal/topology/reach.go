package topology

import (
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
	_, was := t.unreachable[url]
	if reachable == !was {
		if !reachable {
			m := t.unreachable[url]
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
	return true
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
