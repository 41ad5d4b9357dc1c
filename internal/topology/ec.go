package topology

import (
	"cmp"
	"fmt"
	"slices"
)

// ecEntry is one erasure-coded volume and the nodes holding its shards,
// sorted by node URL.
type ecEntry struct {
	collection string
	scheme     string
	holders    []ecHolder
}

type ecHolder struct {
	node   *node
	shards EcShards
}

func (t *Topology) attachEC(n *node, s EcShards) {
	e := t.ec[s.ID]
	if e == nil {
		e = &ecEntry{collection: s.Collection, scheme: s.Scheme}
		t.ec[s.ID] = e
	}
	i, found := slices.BinarySearchFunc(e.holders, n.info.URL, func(h ecHolder, url string) int { return cmp.Compare(h.node.info.URL, url) })
	if found {
		// Two disks of one node hold shards of the volume.
		merged := e.holders[i].shards
		merged.Shards |= s.Shards
		e.holders[i] = ecHolder{n, merged}
		return
	}
	e.holders = slices.Insert(e.holders, i, ecHolder{n, s})
}

func (t *Topology) detachEC(n *node) {
	for di := range n.info.Disks {
		for _, s := range n.info.Disks[di].EcShards {
			e := t.ec[s.ID]
			if e == nil {
				continue
			}
			e.holders = slices.DeleteFunc(e.holders, func(h ecHolder) bool { return h.node == n })
			if len(e.holders) == 0 {
				delete(t.ec, s.ID)
			}
		}
	}
}

// ecLocationsLocked lists the holders of an EC volume, reachable ones
// first, each with the shards it holds.
func (t *Topology) ecLocationsLocked(e *ecEntry) []Location {
	locs := make([]Location, 0, len(e.holders))
	var last []Location
	for _, h := range e.holders {
		l := h.node.location()
		l.EcShards = h.shards.Shards
		if t.reachableLocked(h.node.info.URL) {
			locs = append(locs, l)
		} else {
			last = append(last, l)
		}
	}
	return append(locs, last...)
}

// EcVolume describes an erasure-coded volume as the cluster reports it.
type EcVolume struct {
	ID         uint32
	Collection string
	Scheme     string
	Holders    []Location // each with its EcShards
}

// LookupEC returns an erasure-coded volume's scheme and shard holders; ok
// is false when no live node reports shards of it.
func (t *Topology) LookupEC(volumeID uint32) (EcVolume, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	e := t.ec[volumeID]
	if e == nil {
		return EcVolume{}, false
	}
	return EcVolume{ID: volumeID, Collection: e.collection, Scheme: e.scheme, Holders: t.ecLocationsLocked(e)}, true
}

// EcVolumeStatus summarizes one erasure-coded volume for /cluster/status.
type EcVolumeStatus struct {
	ID         uint32 `json:"id"`
	Collection string `json:"collection,omitempty"`
	Scheme     string `json:"scheme"`
	Shards     int    `json:"shards"`  // distinct shards on live servers
	Total      int    `json:"total"`   // k+m
	Missing    []int  `json:"missing"` // shard indexes no live server holds
	Servers    int    `json:"servers"`
	// Readable: at least k shards are present, so every file can be read.
	Readable bool `json:"readable"`
}

// EcStatus lists the erasure-coded volumes, by id.
func (t *Topology) EcStatus() []EcVolumeStatus {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]EcVolumeStatus, 0, len(t.ec))
	for id, e := range t.ec {
		var k, m int
		fmt.Sscanf(e.scheme, "%d+%d", &k, &m)
		var present uint32
		for _, h := range e.holders {
			present |= h.shards.Shards
		}
		st := EcVolumeStatus{ID: id, Collection: e.collection, Scheme: e.scheme, Total: k + m, Servers: len(e.holders), Missing: []int{}}
		for i := range 32 {
			switch {
			case present&(1<<i) != 0:
				st.Shards++
			case i < k+m:
				st.Missing = append(st.Missing, i)
			}
		}
		st.Readable = k > 0 && st.Shards >= k
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b EcVolumeStatus) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
