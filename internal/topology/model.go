package topology

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/ttl"
)

var (
	// ErrNoWritableVolume: no writable volume in a layout; growth may help.
	ErrNoWritableVolume = errors.New("topology: no writable volume")
	// ErrNoPlacement: the cluster cannot hold a new volume with the asked code.
	ErrNoPlacement = errors.New("topology: no placement")
	// ErrVolumeNotFound: no live node reports the volume.
	ErrVolumeNotFound = errors.New("topology: volume not found")
	// ErrUnknownNode: the node has not sent a heartbeat (or was dropped).
	ErrUnknownNode = errors.New("topology: unknown node")
	// ErrBehindCopy: a write short of copies reached only copies of an
	// under-replicated volume that are not known to hold every
	// acknowledged write; it must not be acknowledged (ReportDegradedWrite).
	ErrBehindCopy = errors.New("topology: the write reached only copies that miss acknowledged writes")
)

// Names used when a volume server does not say where it is.
const (
	DefaultDataCenter = "DefaultDataCenter"
	DefaultRack       = "DefaultRack"
)

// Volume is one copy of a volume as a node reports it.
type Volume struct {
	ID           uint32           `json:"id"`
	Collection   string           `json:"collection,omitempty"`
	Replication  replication.Code `json:"-"`
	TTL          ttl.TTL          `json:"-"`
	Size         uint64           `json:"size"`
	FileCount    uint64           `json:"fileCount"`
	DeleteCount  uint64           `json:"deleteCount"`
	DeletedBytes uint64           `json:"deletedBytes"`
	ReadOnly     bool             `json:"readOnly"`
	Version      uint32           `json:"version,omitempty"`
	ModifiedAt   time.Time        `json:"modifiedAt,omitzero"`
}

// Disk is one disk (directory) of a node.
type Disk struct {
	Dir        string   `json:"dir"`
	MaxVolumes int      `json:"maxVolumes"`
	FreeBytes  uint64   `json:"freeBytes"`
	Volumes    []Volume `json:"volumes"`
	// EcShards are the erasure-coded volumes with shards on this disk. They
	// take no volume slot: a shard is 1/k of a volume.
	EcShards []EcShards `json:"ecShards,omitempty"`
}

// EcShards is one erasure-coded volume's shards on one disk.
type EcShards struct {
	ID          uint32 `json:"id"`
	Collection  string `json:"collection,omitempty"`
	Scheme      string `json:"scheme"`    // "k+m"
	Shards      uint32 `json:"shards"`    // bit i: shard i is here
	ShardSize   uint64 `json:"shardSize"` // bytes of one shard file
	FileCount   uint64 `json:"fileCount"`
	DeleteCount uint64 `json:"deleteCount"`
}

// freeSlots is how many more volumes the disk may hold.
func (d *Disk) freeSlots() int { return max(0, d.MaxVolumes-len(d.Volumes)) }

// NodeInfo is a node's full state, as carried by one heartbeat.
type NodeInfo struct {
	URL        string // ip:port of the HTTP data port; the node's identity
	PublicURL  string // what clients use; defaults to URL
	GRPCPort   int
	DataCenter string
	Rack       string
	Disks      []Disk
	// Sequence numbers the heartbeat this state came from (0: unnumbered).
	Sequence uint64
}

// Location is where one copy of a volume lives.
type Location struct {
	URL        string `json:"url"`
	PublicURL  string `json:"publicUrl"`
	DataCenter string `json:"dataCenter"`
	Rack       string `json:"rack"`
	GRPCPort   int    `json:"grpcPort,omitempty"`
	// EcShards, for an erasure-coded volume: bit i set, shard i is here.
	EcShards uint32 `json:"ecShards,omitempty"`
	// Unreachable (set by Lookup only): the copy's server is marked
	// unreachable (SetReachable, HeartbeatLost).
	Unreachable bool `json:"unreachable,omitempty"`
}

// LayoutKey names a volume layout.
type LayoutKey struct {
	Collection  string
	Replication replication.Code
	TTL         ttl.TTL
}

func (k LayoutKey) String() string {
	return fmt.Sprintf("collection %q replication %s ttl %q", k.Collection, k.Replication, k.TTL)
}

// Options configures a Topology.
type Options struct {
	VolumeSizeLimit uint64 // bytes; a copy this large is no longer writable
	// Intn returns a random int in [0, n); it must be safe for concurrent use.
	// Defaults to math/rand/v2.IntN.
	Intn func(n int) int
	// FailureCooldown is how long a volume stays unwritable after its last
	// reported write failure (see ReportFailure); 0 means
	// DefaultFailureCooldown.
	FailureCooldown time.Duration
	// StaleAfter: a copy on a node last heard from more than StaleAfter
	// before the newest heartbeat from any node is not the one an assign
	// names for the client to write to while a fresher copy would do (see
	// pickFirst). 0: no preference. The master uses twice its pulse.
	StaleAfter time.Duration
}

// Topology is the cluster model. It is safe for concurrent use; reads (assign,
// lookup) take a shared lock and never wait on I/O.
type Topology struct {
	intn       func(int) int
	cooldown   time.Duration
	staleAfter time.Duration

	mu        sync.RWMutex
	sizeLimit uint64
	nodes     map[string]*node
	volumes   map[uint32]*volumeEntry
	layouts   map[LayoutKey]*layout
	ec        map[uint32]*ecEntry
	failures  map[uint32]failure
	// unreachable are live nodes the master cannot reach (see SetReachable).
	unreachable map[string]unreachableMark
	// policies are the degraded write policies by collection ("" = the
	// default); a collection not in it is strict (see SetWritePolicies).
	policies map[string]WritePolicy
	// deficits are the under-replicated volumes of degraded collections.
	deficits map[uint32]*deficit
	// lost are nodes dropped from the topology, until they return: what a
	// refusal names as missing.
	lost map[string]lostNode
	// newestSeen is the latest time any node was heard from (see fresh).
	newestSeen time.Time
}

type node struct {
	info     NodeInfo
	lastSeen time.Time
	// pending are volumes registered by growth that the node's heartbeats have
	// not shown yet. Heartbeats built before the allocation finished may
	// arrive after it (several of them when the master is slow to read the
	// stream); without this they would drop the new copy and make the volume
	// look under-replicated.
	pending map[uint32]pendingVolume
}

// pendingVolume is a registered volume, the heartbeat sequence after which
// the node's heartbeats show it, and how many heartbeats missed it.
type pendingVolume struct {
	v      Volume
	after  uint64
	misses int
}

// pendingHeartbeats is how many unnumbered heartbeats may miss a registered
// volume before the node's own word wins.
const pendingHeartbeats = 3

// NewCopy is one copy of a freshly allocated volume: the node and the
// heartbeat sequence its allocation answered with (0 if unknown).
type NewCopy struct {
	URL               string
	HeartbeatSequence uint64
}

func (n *node) location() Location {
	return Location{URL: n.info.URL, PublicURL: n.info.PublicURL, DataCenter: n.info.DataCenter, Rack: n.info.Rack, GRPCPort: n.info.GRPCPort}
}

func (n *node) freeSlots() int {
	free := 0
	for i := range n.info.Disks {
		free += n.info.Disks[i].freeSlots()
	}
	return free
}

// volumeEntry is one volume id and its copies, sorted by node URL.
type volumeEntry struct {
	key    LayoutKey
	copies []volumeCopy
}

type volumeCopy struct {
	node *node
	vol  Volume
}

// New returns an empty topology.
func New(opts Options) *Topology {
	if opts.Intn == nil {
		opts.Intn = rand.IntN
	}
	if opts.FailureCooldown == 0 {
		opts.FailureCooldown = DefaultFailureCooldown
	}
	return &Topology{
		intn:        opts.Intn,
		cooldown:    opts.FailureCooldown,
		staleAfter:  opts.StaleAfter,
		failures:    map[uint32]failure{},
		unreachable: map[string]unreachableMark{},
		deficits:    map[uint32]*deficit{},
		lost:        map[string]lostNode{},
		sizeLimit:   opts.VolumeSizeLimit,
		nodes:       map[string]*node{},
		volumes:     map[uint32]*volumeEntry{},
		layouts:     map[LayoutKey]*layout{},
		ec:          map[uint32]*ecEntry{},
	}
}

// SetVolumeSizeLimit changes the limit and recomputes writability.
func (t *Topology) SetVolumeSizeLimit(limit uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sizeLimit == limit {
		return
	}
	t.sizeLimit = limit
	for k := range t.layouts {
		t.refreshLayout(k)
	}
}

// VolumeSizeLimit returns the current limit.
func (t *Topology) VolumeSizeLimit() uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.sizeLimit
}

// UpdateNode replaces a node's state with info, as of now. It returns the
// largest volume id the node reports (0 if none).
func (t *Topology) UpdateNode(info NodeInfo, now time.Time) (maxVolumeID uint32) {
	info = normalize(info)
	t.mu.Lock()
	defer t.mu.Unlock()
	affected := map[LayoutKey]bool{}
	n := &node{info: info, lastSeen: now}
	// touched are the volumes whose copies this heartbeat replaces: the
	// only ones whose writability it can change (see refreshLayoutVids).
	var touched []uint32
	if old := t.nodes[info.URL]; old != nil {
		for di := range old.info.Disks {
			for _, v := range old.info.Disks[di].Volumes {
				touched = append(touched, v.ID)
			}
		}
		// The volumes the node reports again keep their entries (no
		// delete and re-insert in maps of a million); sweepEmpty drops the
		// ones it no longer has.
		t.detachKeep(old, affected, true)
		n.keepPending(old.pending, info.Sequence)
	}
	t.nodes[info.URL] = n
	delete(t.lost, info.URL)
	if now.After(t.newestSeen) {
		t.newestSeen = now
	}
	if m, ok := t.unreachable[info.URL]; ok && m.streamLost {
		// Heard from again: the broken stream is over (HeartbeatLost).
		// The volumes it touches are the node's, refreshed below.
		delete(t.unreachable, info.URL)
	}
	var vids []uint32
	for di := range n.info.Disks {
		for _, v := range n.info.Disks[di].Volumes {
			t.attach(n, v, affected)
			maxVolumeID = max(maxVolumeID, v.ID)
			vids = append(vids, v.ID)
		}
		for _, e := range n.info.Disks[di].EcShards {
			t.attachEC(n, e)
			maxVolumeID = max(maxVolumeID, e.ID)
		}
	}
	if len(t.failures) > 0 {
		t.healLocked(vids, now, affected)
	}
	t.sweepEmpty(touched[:len(touched):len(touched)])
	touched = append(touched, vids...)
	for k := range affected {
		t.refreshLayoutVids(k, touched)
	}
	return maxVolumeID
}

// keepPending carries registered volumes that this heartbeat (numbered seq)
// does not show yet into n's state: until a heartbeat numbered after the
// allocation, or for a few heartbeats when either side is unnumbered.
func (n *node) keepPending(prev map[uint32]pendingVolume, seq uint64) {
	for id, p := range prev {
		if n.hasVolume(id) || len(n.info.Disks) == 0 {
			continue
		}
		if seq != 0 && p.after != 0 {
			if seq > p.after {
				continue // built after the allocation: the node's word wins
			}
		} else if p.misses+1 >= pendingHeartbeats {
			continue
		}
		p.misses++
		n.info.Disks[0].Volumes = append(n.info.Disks[0].Volumes, p.v)
		if n.pending == nil {
			n.pending = map[uint32]pendingVolume{}
		}
		n.pending[id] = p
	}
}

func (n *node) hasVolume(id uint32) bool {
	for _, d := range n.info.Disks {
		for _, v := range d.Volumes {
			if v.ID == id {
				return true
			}
		}
	}
	return false
}

func normalize(info NodeInfo) NodeInfo {
	if info.PublicURL == "" {
		info.PublicURL = info.URL
	}
	if info.DataCenter == "" {
		info.DataCenter = DefaultDataCenter
	}
	if info.Rack == "" {
		info.Rack = DefaultRack
	}
	// The caller keeps its slices; ours must not change under us.
	disks := make([]Disk, len(info.Disks))
	for i, d := range info.Disks {
		d.Volumes = slices.Clone(d.Volumes)
		d.EcShards = slices.Clone(d.EcShards)
		disks[i] = d
	}
	info.Disks = disks
	return info
}

// RemoveNode drops a node at once (its heartbeat stream closed cleanly).
func (t *Topology) RemoveNode(url string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.removeLocked(url, "its heartbeat stream closed", time.Now())
}

func (t *Topology) removeLocked(url, cause string, now time.Time) bool {
	n := t.nodes[url]
	if n == nil {
		return false
	}
	t.markLostLocked(n, fmt.Sprintf("copy on %s (data center %s) lost: %s", url, n.info.DataCenter, cause), now)
	t.rememberLost(n, cause, now)
	affected := map[LayoutKey]bool{}
	t.detach(n, affected)
	delete(t.nodes, url)
	// A node that comes back is probed afresh.
	delete(t.unreachable, url)
	for k := range affected {
		t.refreshLayout(k)
	}
	return true
}

// ExpireNodes drops every node last heard from more than timeout before now
// and returns their URLs, sorted.
func (t *Topology) ExpireNodes(now time.Time, timeout time.Duration) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var dead []string
	for url, n := range t.nodes {
		if now.Sub(n.lastSeen) > timeout {
			dead = append(dead, url)
		}
	}
	slices.Sort(dead)
	for _, url := range dead {
		t.removeLocked(url, "no heartbeat for "+timeout.String(), now)
	}
	t.dropStaleFailures()
	return dead
}

func (t *Topology) attach(n *node, v Volume, affected map[LayoutKey]bool) {
	e := t.volumes[v.ID]
	if e == nil {
		e = &volumeEntry{key: LayoutKey{v.Collection, v.Replication, v.TTL}}
		t.volumes[v.ID] = e
		l := t.layouts[e.key]
		if l == nil {
			l = &layout{vids: map[uint32]struct{}{}}
			t.layouts[e.key] = l
		}
		l.vids[v.ID] = struct{}{}
	}
	if k := (LayoutKey{v.Collection, v.Replication, v.TTL}); k != e.key {
		// The volume was reconfigured (volume.configure.replication) on a
		// live server: it moves to its new layout at once.
		if l := t.layouts[e.key]; l != nil {
			delete(l.vids, v.ID)
		}
		affected[e.key] = true
		e.key = k
		l := t.layouts[k]
		if l == nil {
			l = &layout{vids: map[uint32]struct{}{}}
			t.layouts[k] = l
		}
		l.vids[v.ID] = struct{}{}
	}
	i, found := slices.BinarySearchFunc(e.copies, n.info.URL, func(c volumeCopy, url string) int { return cmp.Compare(c.node.info.URL, url) })
	if found {
		e.copies[i] = volumeCopy{n, v}
	} else {
		e.copies = slices.Insert(e.copies, i, volumeCopy{n, v})
	}
	affected[e.key] = true
}

func (t *Topology) detach(n *node, affected map[LayoutKey]bool) {
	t.detachKeep(n, affected, false)
}

// sweepEmpty drops the entries of vids left without copies (see detachKeep).
func (t *Topology) sweepEmpty(vids []uint32) {
	for _, vid := range vids {
		if e := t.volumes[vid]; e != nil && len(e.copies) == 0 {
			delete(t.volumes, vid)
			if l := t.layouts[e.key]; l != nil {
				delete(l.vids, vid)
			}
		}
	}
}

// detachKeep is detach; with keepEmpty, a volume left without copies keeps
// its entry, for the caller to re-attach or sweepEmpty.
func (t *Topology) detachKeep(n *node, affected map[LayoutKey]bool, keepEmpty bool) {
	t.detachEC(n)
	for di := range n.info.Disks {
		for _, v := range n.info.Disks[di].Volumes {
			e := t.volumes[v.ID]
			if e == nil {
				continue
			}
			e.copies = slices.DeleteFunc(e.copies, func(c volumeCopy) bool { return c.node == n })
			affected[e.key] = true
			if len(e.copies) == 0 && !keepEmpty {
				delete(t.volumes, v.ID)
				if l := t.layouts[e.key]; l != nil {
					delete(l.vids, v.ID)
				}
			}
		}
	}
}

// Lookup returns the locations of a volume's copies, sorted by URL, except
// that copies on nodes marked unreachable (Location.Unreachable), and copies
// still catching up after a degraded write, come last: a reader tries them
// only when the others fail.
func (t *Topology) Lookup(volumeID uint32) ([]Location, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	e := t.volumes[volumeID]
	if e == nil {
		if ec := t.ec[volumeID]; ec != nil {
			return t.ecLocationsLocked(ec), nil
		}
		return nil, fmt.Errorf("%w: volume %d", ErrVolumeNotFound, volumeID)
	}
	locs := make([]Location, 0, len(e.copies))
	var last []Location
	for _, c := range e.copies {
		// Copies still catching up (see WritePolicy) come last too.
		loc := c.node.location()
		loc.Unreachable = !t.reachableLocked(c.node.info.URL)
		if !loc.Unreachable && t.goodCopy(volumeID, c) {
			locs = append(locs, loc)
		} else {
			last = append(last, loc)
		}
	}
	return append(locs, last...), nil
}

// RegisterVolume records a volume just allocated on the given nodes, without
// waiting for their next heartbeat. The copy goes to the disk with the most
// free slots; the next heartbeat replaces the guess with the truth.
func (t *Topology) RegisterVolume(v Volume, copies []NewCopy) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range copies {
		if t.nodes[c.URL] == nil {
			return fmt.Errorf("%w %s", ErrUnknownNode, c.URL)
		}
	}
	affected := map[LayoutKey]bool{}
	for _, c := range copies {
		n := t.nodes[c.URL]
		if len(n.info.Disks) == 0 {
			n.info.Disks = []Disk{{}}
		}
		best := 0
		for i := range n.info.Disks {
			if n.info.Disks[i].freeSlots() > n.info.Disks[best].freeSlots() {
				best = i
			}
		}
		d := &n.info.Disks[best]
		if slices.ContainsFunc(d.Volumes, func(x Volume) bool { return x.ID == v.ID }) {
			continue
		}
		d.Volumes = append(d.Volumes, v)
		t.attach(n, v, affected)
		if n.pending == nil {
			n.pending = map[uint32]pendingVolume{}
		}
		n.pending[v.ID] = pendingVolume{v: v, after: c.HeartbeatSequence}
	}
	// A fresh volume: a copy whose heartbeat showed it before this
	// registration made it look short, but no copy missed a write.
	t.dropPresenceDeficit(v.ID)
	for k := range affected {
		t.refreshLayout(k)
	}
	return nil
}
