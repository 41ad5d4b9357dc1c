package master

import (
	"context"
	"sync"
	"time"

	"github.com/kelpfs/kelp/internal/consensus"
	"github.com/kelpfs/kelp/internal/topology"
)

// Deficits in raft. Which copies of a degraded-policy volume missed
// acknowledged writes is known only from what the leader saw happen (a
// write report, a failed forward, a lost server); a follower's mirrored
// topology cannot tell a present copy that missed writes from a good one.
// So the leader commits the changes of its deficit table (topology
// DeficitRecords) to raft: every heal tick, and before it answers a volume
// server's report of a write short of copies, so that an acknowledged write
// is never forgotten by the next leader. A newly elected leader, after its
// barrier, adopts the committed records (topology.AdoptDeficits) before it
// commits anything or heals anything, and goes on healing from them.

// deficitSync serialises the commits of the deficit table: one diff at a
// time, each computed from the newest table, so that an older diff never
// lands after a newer one.
type deficitSync struct {
	mu sync.Mutex
	// term is the raft term in which this master adopted the committed
	// records; a leader of a later term adopts them again.
	term uint64
}

// deficitCommitTimeout bounds one commit of the table from the heal loop.
const deficitCommitTimeout = 5 * time.Second

// updateDeficits runs change (which may be nil) against the topology's
// deficit table and commits what changed. Only the leader may; a leader
// that has not adopted the committed records in its term adopts them first,
// so that change is made on (and the diff taken against) its predecessor's
// table.
func (s *Server) updateDeficits(ctx context.Context, change func() error) error {
	s.deficits.mu.Lock()
	defer s.deficits.mu.Unlock()
	if !s.cons.IsLeader() {
		return s.notLeader()
	}
	if term := s.cons.Stats().Term; s.deficits.term != term {
		if err := s.cons.WaitLeader(ctx); err != nil { // the barrier: every earlier record applied
			return err
		}
		committed := s.cons.Deficits()
		s.topo.AdoptDeficits(recordsFromConsensus(committed))
		s.deficits.term = term
		if len(committed) > 0 {
			s.log.Info("adopted the under-replicated volumes recorded by earlier leaders", "volumes", len(committed), "term", term)
		}
	}
	if change != nil {
		if err := change(); err != nil {
			return err
		}
	}
	set, clear := diffDeficits(s.topo.DeficitRecords(), s.cons.Deficits())
	return s.cons.SetDeficits(ctx, set, clear)
}

// commitDeficits is updateDeficits with no change, for the heal loop and a
// new leader.
func (s *Server) commitDeficits() {
	ctx, cancel := context.WithTimeout(s.ctx, deficitCommitTimeout)
	defer cancel()
	if err := s.updateDeficits(ctx, nil); err != nil && s.ctx.Err() == nil && s.cons.IsLeader() {
		s.log.Warn("could not record the under-replicated volumes in raft; retrying", "err", err)
	}
}

// diffDeficits returns the records of local that committed lacks or holds
// otherwise, and the volumes committed has that local does not.
func diffDeficits(local map[uint32]topology.DeficitRecord, committed map[uint32]consensus.Deficit) (map[uint32]consensus.Deficit, []uint32) {
	var set map[uint32]consensus.Deficit
	for vid, r := range local {
		d := consensus.Deficit{Since: r.Since.UTC().Round(0), Cause: r.Cause, Good: r.Good}
		if c, ok := committed[vid]; ok && c.Equal(d) {
			continue
		}
		if set == nil {
			set = map[uint32]consensus.Deficit{}
		}
		set[vid] = d
	}
	var clear []uint32
	for vid := range committed {
		if _, ok := local[vid]; !ok {
			clear = append(clear, vid)
		}
	}
	return set, clear
}

func recordsFromConsensus(ds map[uint32]consensus.Deficit) map[uint32]topology.DeficitRecord {
	out := make(map[uint32]topology.DeficitRecord, len(ds))
	for vid, d := range ds {
		out[vid] = topology.DeficitRecord{Since: d.Since, Cause: d.Cause, Good: d.Good}
	}
	return out
}

// CommittedDeficits returns the deficit records as this master has applied
// them from raft (on a follower too), for tests and status pages.
func (s *Server) CommittedDeficits() map[uint32]consensus.Deficit { return s.cons.Deficits() }
