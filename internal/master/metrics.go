package master

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kelpfs/kelp/internal/metrics"
)

// Metrics is the registry this master reports to (Config.Metrics, or its
// own).
func (s *Server) Metrics() *metrics.Registry { return s.metrics }

// httpOp names a master HTTP request's operation for the request metrics.
func httpOp(r *http.Request) string {
	switch r.URL.Path {
	case "/dir/assign":
		return "assign"
	case "/dir/lookup":
		return "lookup"
	case "/dir/status", "/cluster/status", "/cluster/raft", "/cluster/topology":
		return "status"
	case "/cluster/configure":
		return "configure"
	case "/admin/lock", "/admin/unlock":
		return "lock"
	case "/vol/grow":
		return "grow"
	case "/healthz":
		return "healthz"
	}
	return "other"
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

// masterCollector reads the raft state and the topology at scrape time.
// Every master reports the topology it holds (followers mirror the
// leader's); dashboards take the leader's (kelp_raft_leader == 1) or the
// max over masters.
type masterCollector struct {
	s *Server

	raftLeader, raftRole, raftTerm, raftCommit, raftApplied, raftLast, raftContact, raftPeers, leaderKnown *prometheus.Desc

	servers, unreachable, hbAge, freeSlots, diskFree                                               *prometheus.Desc
	volumes, volumeBytes, garbageBytes, writable, underRepl, deficit, behind                       *prometheus.Desc
	ecVolumes, ecMissing, ecUnreadable, ecRebuildRunning, ecRebuildWaiting, healCopied, healCaught *prometheus.Desc
}

func newMasterCollector(s *Server) *masterCollector {
	return &masterCollector{
		s:           s,
		raftLeader:  desc("kelp_raft_leader", "1 if this master is the Raft leader, else 0."),
		raftRole:    desc("kelp_raft_role", "1 for this master's current Raft role (leader, follower, candidate).", "role"),
		raftTerm:    desc("kelp_raft_term", "Current Raft term."),
		raftCommit:  desc("kelp_raft_commit_index", "Raft commit index."),
		raftApplied: desc("kelp_raft_applied_index", "Raft index applied to the state machine."),
		raftLast:    desc("kelp_raft_last_index", "Last Raft log index stored."),
		raftContact: desc("kelp_raft_last_contact_seconds", "Followers: seconds since the last message from the leader (0 on the leader)."),
		raftPeers:   desc("kelp_raft_peers", "Masters in the Raft group's configuration."),
		leaderKnown: desc("kelp_master_leader_known", "1 if this master knows a live leader (itself or another), else 0."),

		servers:      desc("kelp_master_volume_servers", "Volume servers sending heartbeats."),
		unreachable:  desc("kelp_master_volume_servers_unreachable", "Volume servers that heartbeat but whose advertised address the master cannot reach."),
		hbAge:        desc("kelp_master_heartbeat_age_seconds", "Seconds since each volume server's last heartbeat.", "server"),
		freeSlots:    desc("kelp_master_volume_server_free_slots", "Volumes each server can still create.", "server"),
		diskFree:     desc("kelp_master_disk_free_bytes", "Free bytes of each volume server disk, as last reported.", "server", "dir"),
		volumes:      desc("kelp_master_volumes", "Volumes (not copies), by collection.", "collection"),
		volumeBytes:  desc("kelp_master_volume_bytes", "Bytes of volumes (one copy each), by collection.", "collection"),
		garbageBytes: desc("kelp_master_volume_garbage_bytes", "Bytes of deleted and overwritten records awaiting vacuum (one copy each), by collection.", "collection"),
		writable:     desc("kelp_master_volumes_writable", "Volumes open for assigns."),
		underRepl:    desc("kelp_master_volumes_under_replicated", "Volumes with fewer good copies than their replication asks for."),
		deficit:      desc("kelp_master_replica_deficit", "Copies missing or behind, summed over all volumes."),
		behind:       desc("kelp_master_copies_behind", "Present copies that lack acknowledged writes and must catch up."),

		ecVolumes:        desc("kelp_master_ec_volumes", "Erasure-coded volumes."),
		ecMissing:        desc("kelp_master_ec_shards_missing", "EC shards no live server holds, summed over EC volumes."),
		ecUnreadable:     desc("kelp_master_ec_volumes_unreadable", "EC volumes with fewer than k shards present."),
		ecRebuildRunning: desc("kelp_master_ec_rebuild_running", "1 while the automatic EC rebuild runs on this master."),
		ecRebuildWaiting: desc("kelp_master_ec_rebuild_waiting", "EC volumes missing shards that wait for the automatic rebuild."),
		healCopied:       desc("kelp_master_heal_copied_total", "Needles copied and deletes applied by catch-ups of copies behind."),
		healCaught:       desc("kelp_master_heal_caught_up_total", "Copies that became good through a catch-up."),
	}
}

func (c *masterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.raftLeader, c.raftRole, c.raftTerm, c.raftCommit, c.raftApplied, c.raftLast,
		c.raftContact, c.raftPeers, c.leaderKnown, c.servers, c.unreachable, c.hbAge, c.freeSlots, c.diskFree, c.volumes,
		c.volumeBytes, c.garbageBytes, c.writable, c.underRepl, c.deficit, c.behind, c.ecVolumes, c.ecMissing,
		c.ecUnreadable, c.ecRebuildRunning, c.ecRebuildWaiting, c.healCopied, c.healCaught} {
		ch <- d
	}
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c *masterCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	now := time.Now()
	if s.cons != nil {
		st := s.cons.Stats()
		gauge(ch, c.raftLeader, b2f(st.Role == "leader"))
		gauge(ch, c.raftRole, 1, st.Role)
		gauge(ch, c.raftTerm, float64(st.Term))
		gauge(ch, c.raftCommit, float64(st.CommitIndex))
		gauge(ch, c.raftApplied, float64(st.AppliedIndex))
		gauge(ch, c.raftLast, float64(st.LastIndex))
		contact := 0.0
		if st.Role != "leader" && !st.LastContact.IsZero() {
			contact = now.Sub(st.LastContact).Seconds()
		}
		gauge(ch, c.raftContact, contact)
		gauge(ch, c.raftPeers, float64(max(1, len(s.cfg.Peers))))
		lid, _ := s.cons.Leader()
		gauge(ch, c.leaderKnown, b2f(lid != ""))
	}

	topo := s.topo.Status()
	type agg struct{ volumes, bytes, garbage float64 }
	byColl := map[string]*agg{}
	type copies struct{ have, want int }
	vols := map[uint32]*copies{}
	nServers, nUnreachable := 0, 0
	for _, dc := range topo.DataCenters {
		for _, rack := range dc.Racks {
			for _, n := range rack.Nodes {
				nServers++
				if !n.Reachable {
					nUnreachable++
				}
				gauge(ch, c.hbAge, now.Sub(n.LastHeartbeat).Seconds(), n.URL)
				gauge(ch, c.freeSlots, float64(n.FreeSlots), n.URL)
				for _, d := range n.Disks {
					gauge(ch, c.diskFree, float64(d.FreeBytes), n.URL, d.Dir)
					for _, v := range d.Volumes {
						cp := vols[v.ID]
						if cp == nil {
							cp = &copies{want: v.Replication.Copies()}
							vols[v.ID] = cp
							a := byColl[v.Collection]
							if a == nil {
								a = &agg{}
								byColl[v.Collection] = a
							}
							a.volumes++
							a.bytes += float64(v.Size)
							a.garbage += float64(v.DeletedBytes)
						}
						if n.Reachable {
							cp.have++
						}
					}
				}
			}
		}
	}
	gauge(ch, c.servers, float64(nServers))
	gauge(ch, c.unreachable, float64(nUnreachable))
	for coll, a := range byColl {
		gauge(ch, c.volumes, a.volumes, coll)
		gauge(ch, c.volumeBytes, a.bytes, coll)
		gauge(ch, c.garbageBytes, a.garbage, coll)
	}
	writable := 0
	for _, l := range topo.Layouts {
		writable += len(l.Writable)
	}
	gauge(ch, c.writable, float64(writable))
	// A volume is under-replicated when copies are missing (counted from
	// the heartbeats) or present copies are behind (the write policy's
	// deficits); the deficit counts both.
	under := map[uint32]bool{}
	deficit, behind := 0, 0
	for id, cp := range vols {
		if cp.have < cp.want {
			under[id] = true
			deficit += cp.want - cp.have
		}
	}
	for _, d := range topo.UnderReplicated {
		under[d.VolumeID] = true
		behind += len(d.Behind)
		deficit += len(d.Behind)
	}
	gauge(ch, c.underRepl, float64(len(under)))
	gauge(ch, c.deficit, float64(deficit))
	gauge(ch, c.behind, float64(behind))

	ec := s.topo.EcStatus()
	missing, unreadable := 0, 0
	for _, e := range ec {
		missing += len(e.Missing)
		if !e.Readable {
			unreadable++
		}
	}
	gauge(ch, c.ecVolumes, float64(len(ec)))
	gauge(ch, c.ecMissing, float64(missing))
	gauge(ch, c.ecUnreadable, float64(unreadable))
	r := &s.ecRepair
	r.mu.Lock()
	running, waiting := r.running != 0, len(r.since)
	r.mu.Unlock()
	gauge(ch, c.ecRebuildRunning, b2f(running))
	gauge(ch, c.ecRebuildWaiting, float64(waiting))
	if s.heal != nil {
		ch <- prometheus.MustNewConstMetric(c.healCopied, prometheus.CounterValue, float64(s.heal.copied.Load()))
		ch <- prometheus.MustNewConstMetric(c.healCaught, prometheus.CounterValue, float64(s.heal.caught.Load()))
	}
}
