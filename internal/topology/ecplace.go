package topology

import (
	"cmp"
	"errors"
	"slices"
)

// ErrNoECPlacement: no live node can take a shard.
var ErrNoECPlacement = errors.New("topology: no node for EC shards")

// ShardPlacer spreads the shards of one EC volume over nodes: each shard
// goes to the data center, then the rack, then the node holding the fewest
// shards of the volume so far, ties broken by the node's total shard count
// (all volumes) and then its URL. Shards placed this way are as even as the
// tree allows at every level, so losing one data center, rack or node loses
// as few shards as possible.
type ShardPlacer struct {
	nodes   []placerNode
	inDC    map[string]int
	inRack  map[[2]string]int
	onNode  map[string]int
	loadOf  map[string]int
	skipURL map[string]bool
}

type placerNode struct {
	url, dc, rack string
}

// NewShardPlacer starts from the cluster's nodes; load is how many EC shards
// (of any volume) each node holds already.
func NewShardPlacer(nodes []NodeInfo, load map[string]int) *ShardPlacer {
	p := &ShardPlacer{inDC: map[string]int{}, inRack: map[[2]string]int{}, onNode: map[string]int{}, loadOf: map[string]int{}, skipURL: map[string]bool{}}
	for _, n := range nodes {
		p.nodes = append(p.nodes, placerNode{url: n.URL, dc: fixDC(n.DataCenter), rack: fixRack(n.Rack)})
		p.loadOf[n.URL] = load[n.URL]
	}
	slices.SortFunc(p.nodes, func(a, b placerNode) int { return cmp.Compare(a.url, b.url) })
	return p
}

// Exclude keeps url out of every later choice (a node being drained, or dead).
func (p *ShardPlacer) Exclude(url string) { p.skipURL[url] = true }

// Hold records that url already holds n shards of the volume.
func (p *ShardPlacer) Hold(url string, n int) {
	for _, x := range p.nodes {
		if x.url == url {
			p.inDC[x.dc] += n
			p.inRack[[2]string{x.dc, x.rack}] += n
			p.onNode[url] += n
			p.loadOf[url] += n
		}
	}
}

// Next picks the node for one more shard and records it there.
func (p *ShardPlacer) Next() (string, error) {
	best := -1
	key := func(x placerNode) []int {
		return []int{p.inDC[x.dc], p.inRack[[2]string{x.dc, x.rack}], p.onNode[x.url], p.loadOf[x.url]}
	}
	for i, x := range p.nodes {
		if p.skipURL[x.url] {
			continue
		}
		if best < 0 || slices.Compare(key(x), key(p.nodes[best])) < 0 {
			best = i
		}
	}
	if best < 0 {
		return "", ErrNoECPlacement
	}
	p.Hold(p.nodes[best].url, 1)
	return p.nodes[best].url, nil
}
