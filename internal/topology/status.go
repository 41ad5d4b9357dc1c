package topology

import (
	"cmp"
	"slices"
	"time"
)

// Status is the topology tree, for status pages. Everything is sorted by name.
type Status struct {
	VolumeSizeLimit uint64             `json:"volumeSizeLimit"`
	DataCenters     []DataCenterStatus `json:"dataCenters"`
	Layouts         []LayoutStatus     `json:"layouts"`
	// Failures are volumes out of assigns after a reported write failure.
	Failures []VolumeFailure `json:"failures,omitempty"`
	// UnderReplicated are volumes of degraded collections some of whose
	// copies lack acknowledged writes or are missing (see WritePolicy).
	UnderReplicated []VolumeDeficit `json:"underReplicated,omitempty"`
}

type DataCenterStatus struct {
	Name  string       `json:"name"`
	Racks []RackStatus `json:"racks"`
}

type RackStatus struct {
	Name  string       `json:"name"`
	Nodes []NodeStatus `json:"nodes"`
}

// NodeStatus describes one volume server.
type NodeStatus struct {
	URL           string    `json:"url"`
	PublicURL     string    `json:"publicUrl"`
	DataCenter    string    `json:"dataCenter"`
	Rack          string    `json:"rack"`
	GRPCPort      int       `json:"grpcPort"`
	Volumes       int       `json:"volumes"`
	MaxVolumes    int       `json:"maxVolumes"`
	FreeSlots     int       `json:"freeSlots"`
	LastHeartbeat time.Time `json:"lastHeartbeat"`
	// Reachable is false when the node sends heartbeats but the master's
	// probes of its advertised address fail; its copies then count as
	// missing. UnreachableSince and ProbeError say since when and why.
	Reachable        bool      `json:"reachable"`
	UnreachableSince time.Time `json:"unreachableSince,omitzero"`
	ProbeError       string    `json:"probeError,omitempty"`
	// HeartbeatLost: the node's heartbeat stream broke (it was killed, or
	// the connection cut); it counts as unreachable until heard from again.
	HeartbeatLost bool   `json:"heartbeatLost,omitempty"`
	Disks         []Disk `json:"disks,omitempty"`
}

// LayoutStatus summarises one volume layout.
type LayoutStatus struct {
	Collection  string   `json:"collection"`
	Replication string   `json:"replication"`
	TTL         string   `json:"ttl"`
	Volumes     []uint32 `json:"volumes"`
	Writable    []uint32 `json:"writable"`
}

// Nodes lists every live node, sorted by data center, rack and URL; withDisks
// includes each node's disks and volumes.
func (t *Topology) Nodes(withDisks bool) []NodeStatus {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]NodeStatus, 0, len(t.nodes))
	for _, n := range t.nodes {
		s := NodeStatus{
			URL: n.info.URL, PublicURL: n.info.PublicURL, DataCenter: n.info.DataCenter, Rack: n.info.Rack,
			GRPCPort: n.info.GRPCPort, FreeSlots: n.freeSlots(), LastHeartbeat: n.lastSeen, Reachable: true,
		}
		if m, bad := t.unreachable[n.info.URL]; bad {
			s.Reachable, s.UnreachableSince, s.ProbeError, s.HeartbeatLost = false, m.since, m.cause, m.streamLost
		}
		for i := range n.info.Disks {
			s.Volumes += len(n.info.Disks[i].Volumes)
			s.MaxVolumes += n.info.Disks[i].MaxVolumes
		}
		if withDisks {
			s.Disks = make([]Disk, len(n.info.Disks))
			for i, d := range n.info.Disks {
				d.Volumes = slices.Clone(d.Volumes)
				slices.SortFunc(d.Volumes, func(a, b Volume) int { return cmp.Compare(a.ID, b.ID) })
				s.Disks[i] = d
			}
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b NodeStatus) int {
		return cmp.Or(cmp.Compare(a.DataCenter, b.DataCenter), cmp.Compare(a.Rack, b.Rack), cmp.Compare(a.URL, b.URL))
	})
	return out
}

// Status returns the whole tree and the layouts.
func (t *Topology) Status() Status {
	nodes := t.Nodes(true)
	failures := t.Failures()
	deficits := t.Deficits()
	t.mu.RLock()
	st := Status{VolumeSizeLimit: t.sizeLimit, Failures: failures, UnderReplicated: deficits}
	for k, l := range t.layouts {
		ls := LayoutStatus{Collection: k.Collection, Replication: k.Replication.String(), TTL: k.TTL.String(), Writable: slices.Clone(l.writable)}
		for vid := range l.vids {
			ls.Volumes = append(ls.Volumes, vid)
		}
		slices.Sort(ls.Volumes)
		st.Layouts = append(st.Layouts, ls)
	}
	t.mu.RUnlock()
	slices.SortFunc(st.Layouts, func(a, b LayoutStatus) int {
		return cmp.Or(cmp.Compare(a.Collection, b.Collection), cmp.Compare(a.Replication, b.Replication), cmp.Compare(a.TTL, b.TTL))
	})
	for _, n := range nodes {
		if len(st.DataCenters) == 0 || st.DataCenters[len(st.DataCenters)-1].Name != n.DataCenter {
			st.DataCenters = append(st.DataCenters, DataCenterStatus{Name: n.DataCenter})
		}
		dc := &st.DataCenters[len(st.DataCenters)-1]
		if len(dc.Racks) == 0 || dc.Racks[len(dc.Racks)-1].Name != n.Rack {
			dc.Racks = append(dc.Racks, RackStatus{Name: n.Rack})
		}
		r := &dc.Racks[len(dc.Racks)-1]
		r.Nodes = append(r.Nodes, n)
	}
	return st
}
