package master

import (
	"context"
	"fmt"
	"time"

	"github.com/kelpfs/kelp/internal/pb/masterpb"
	"github.com/kelpfs/kelp/internal/topology"
)

// mirrorInterval is how often a follower copies the leader's topology:
// half a pulse, within [100ms, 1s].
func (s *Server) mirrorInterval() time.Duration {
	return min(max(s.cfg.PulseInterval/2, 100*time.Millisecond), time.Second)
}

// mirrorLoop keeps a follower's topology warm by copying the leader's every
// mirrorInterval (volume servers heartbeat only the leader), so that a
// follower elected leader assigns at once instead of waiting for every volume
// server to find it. It also keeps the cached settings current on every
// master, since settings change through raft without a local event.
//
// What is not mirrored: volumes taken out of assigns by a reported failure
// (the marks are the leader's alone). A new leader may hand such a volume out
// again; the write fails, the volume server reports it again, and the volume
// is out once more.
func (s *Server) mirrorLoop() {
	defer s.wg.Done()
	interval := s.mirrorInterval()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		// A new leader is mirrored at once: it is the moment a follower's
		// copy is most out of date.
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		case <-s.cons.LeaderChanged():
		}
		s.refreshSettings()
		if s.cons.IsLeader() {
			continue
		}
		leader := s.leader()
		if leader == "" || leader == s.httpAddr {
			continue
		}
		if err := s.mirrorOnce(leader, interval); err != nil && s.ctx.Err() == nil {
			s.log.Debug("mirror leader topology", "leader", leader, "err", err)
		}
	}
}

func (s *Server) mirrorOnce(leader string, timeout time.Duration) error {
	cc, err := s.masterClients.conn(leader)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	defer cancel()
	resp, err := masterpb.NewMasterClient(cc).Topology(s.forwardCtx(ctx), &masterpb.TopologyRequest{})
	if err != nil {
		return err
	}
	s.applyMirror(resp)
	return nil
}

// applyMirror makes the topology the leader's, except for the nodes that
// heartbeat this master directly: their own word is fresher.
func (s *Server) applyMirror(resp *masterpb.TopologyResponse) {
	seen := map[string]bool{}
	for _, dc := range resp.GetDataCenters() {
		for _, r := range dc.GetRacks() {
			for _, n := range r.GetNodes() {
				seen[n.GetUrl()] = true
				if s.streams.has(n.GetUrl()) {
					continue
				}
				info := topology.NodeInfo{
					URL: n.GetUrl(), PublicURL: n.GetPublicUrl(), GRPCPort: int(n.GetGrpcPort()),
					DataCenter: dc.GetId(), Rack: r.GetId(), Disks: disksFromPB(n.GetDisks()),
				}
				s.topo.UpdateNode(info, time.UnixMilli(n.GetLastSeenUnixMs()))
			}
		}
	}
	for _, n := range s.topo.Nodes(false) {
		if !seen[n.URL] && !s.streams.has(n.URL) {
			s.topo.RemoveNode(n.URL)
		}
	}
}

// ErrWarmingUp: a newly elected leader does not know a volume or has no
// writable one yet, but its topology may simply be incomplete.
var errWarmingUp = fmt.Errorf("%w: this master was just elected and volume servers are still reporting", ErrLeaderUnreachable)

// warmUp bounds how long a new leader distrusts its topology: volume
// servers reconnect within about a second of a leader change.
const warmUp = 2 * time.Second

// warm reports whether this leader's topology can be trusted to be complete:
// every node it knows has a heartbeat stream open to it, or
// min(warmUp, a pulse) has passed. Until then "volume not found" and "no
// writable volume" may only mean that a volume server has not reconnected
// yet (the mirrored copy lags by up to a second), so the leader answers 503
// (clients retry) instead of 404, or growing volumes that probably exist.
func (s *Server) warm() bool {
	since := time.Unix(0, s.leaderSince.Load())
	if time.Since(since) > min(warmUp, s.cfg.PulseInterval) {
		return true
	}
	nodes := s.topo.Nodes(false)
	if len(nodes) == 0 {
		// No volume server has reported yet: a master just started (alone
		// or not) knows nothing of the volumes already on disk, so "not
		// found" would be a lie to a client that retries on 503.
		return false
	}
	// A node with a stream open to this master reports its full state on
	// every heartbeat; the others are mirrored copies that may lag.
	for _, n := range nodes {
		if !s.streams.has(n.URL) {
			return false
		}
	}
	return true
}
