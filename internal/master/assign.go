package master

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/topology"
	"github.com/kelpfs/kelp/internal/ttl"
)

// assignRequest is an assign in domain terms, from HTTP or gRPC.
type assignRequest struct {
	Count       uint64
	Collection  string
	Replication string // "" => the collection's or cluster's default
	TTL         string
	DataCenter  string
}

type assignResult struct {
	FID       fid.FileID
	Count     uint64
	Locations []topology.Location // [0] is where the client writes
}

// maxAssignCount bounds one assign's key reservation.
const maxAssignCount = 1 << 20

// layoutKey resolves the request's layout, applying default replication.
func (s *Server) layoutKey(collection, repl, ttlStr string) (topology.LayoutKey, error) {
	if err := checkCollection(collection); err != nil {
		return topology.LayoutKey{}, err
	}
	if repl == "" {
		set := s.currentSettings()
		repl = set.DefaultReplication
		if r, ok := set.CollectionReplication[collection]; ok {
			repl = r
		}
	}
	code, err := replication.Parse(repl)
	if err != nil {
		return topology.LayoutKey{}, err
	}
	t, err := ttl.Parse(ttlStr)
	if err != nil {
		return topology.LayoutKey{}, err
	}
	return topology.LayoutKey{Collection: collection, Replication: code, TTL: t}, nil
}

// maxCollectionLen keeps a volume's file names ("<collection>_<id>.ec13",
// ".vif", ...) within the 255 bytes file systems allow.
const maxCollectionLen = 200

// checkCollection refuses a collection name that cannot be the start of a
// volume's file name on every volume server: a path separator, NUL, "." or
// "..", or a name too long. A volume server would refuse to allocate such a
// volume; refusing here answers 400 instead of growing in vain.
func checkCollection(name string) error {
	if strings.ContainsAny(name, "/\\\x00") || name == "." || name == ".." || len(name) > maxCollectionLen {
		return fmt.Errorf("%w: collection %q: no '/', '\\' or NUL, not '.' or '..', at most %d bytes", ErrBadRequest, name, maxCollectionLen)
	}
	return nil
}

// assign picks a writable volume (growing one if there is none) and reserves
// Count keys. The fast path takes a read lock in the topology and a mutex in
// the key allocator, nothing else.
func (s *Server) assign(ctx context.Context, req assignRequest) (assignResult, error) {
	if req.Count == 0 {
		req.Count = 1
	}
	if req.Count > maxAssignCount {
		return assignResult{}, fmt.Errorf("%w: count %d is above %d", ErrBadRequest, req.Count, maxAssignCount)
	}
	if !s.cons.IsLeader() {
		return assignResult{}, s.notLeader()
	}
	key, err := s.layoutKey(req.Collection, req.Replication, req.TTL)
	if err != nil {
		return assignResult{}, err
	}
	a, err := s.topo.PickForAssign(key, req.DataCenter)
	if errors.Is(err, topology.ErrNoWritableVolume) {
		if !s.warm() && len(s.topo.Nodes(false)) > 0 {
			// (With no volume server at all, growing fails saying so.)
			return assignResult{}, fmt.Errorf("%w (%w)", errWarmingUp, err)
		}
		if _, gerr := s.grow(ctx, key, req.DataCenter, 0); gerr != nil {
			if why := s.topo.ExplainUnwritable(key); why != "" {
				return assignResult{}, fmt.Errorf("no writable volume for %s (%s) and cannot grow one: %w", key, why, gerr)
			}
			return assignResult{}, fmt.Errorf("no writable volume for %s and cannot grow one: %w", key, gerr)
		}
		a, err = s.topo.PickForAssign(key, req.DataCenter)
	}
	if err != nil {
		return assignResult{}, err
	}
	first, err := s.cons.NextKeys(ctx, req.Count)
	if err != nil {
		return assignResult{}, err
	}
	return assignResult{
		FID:       fid.FileID{Volume: a.VolumeID, Key: first, Cookie: rand.Uint32()},
		Count:     req.Count,
		Locations: a.Locations,
	}, nil
}

// growCount is how many volumes one automatic growth creates, given how many
// disks have room. Assigns spread writes over a layout's writable volumes,
// which pays where the volumes sit on different disks (parallel I/O) and
// costs where they share one: each volume syncs on its own, so concurrent
// writers split into smaller group commits. Measured with kelp benchmark
// (1 KiB, 16 writers) on one disk: 6,828 writes/s over seven volumes, 8,148/s
// over one. So: one volume per `copies` disks, at most 7 (6 for two copies, 3
// for more), at least 1.
func growCount(code replication.Code, disks int) int {
	most := 3
	switch code.Copies() {
	case 1:
		most = 7
	case 2:
		most = 6
	}
	return min(most, max(1, disks/code.Copies()))
}

// growName names a layout's growth in one data center ("" for any): the
// unit of the growth lock and of the pause after failures.
func growName(key topology.LayoutKey, dc string) string {
	name := "growth of " + key.String()
	if dc != "" {
		name += " in data center " + dc
	}
	return name
}

func (s *Server) growLock(name string) *sync.Mutex {
	s.growMu.Lock()
	defer s.growMu.Unlock()
	mu := s.growLocks[name]
	if mu == nil {
		mu = &sync.Mutex{}
		s.growLocks[name] = mu
	}
	return mu
}

// grow creates count new volumes of the layout (0 => automatic count, and
// nothing when a writable volume appeared while waiting for the lock). Growth
// is serialised per layout so that a burst of assigns grows once.
func (s *Server) grow(ctx context.Context, key topology.LayoutKey, dc string, count int) ([]uint32, error) {
	name := growName(key, dc)
	mu := s.growLock(name)
	mu.Lock()
	defer mu.Unlock()
	if count == 0 {
		if _, err := s.topo.PickForAssign(key, dc); err == nil {
			return nil, nil
		}
		if err := s.growthBackoff.check(name, time.Now()); err != nil {
			return nil, err
		}
		count = growCount(key.Replication, s.topo.DisksWithRoom(dc))
	}
	plans, err := s.topo.PlanGrowth(key.Replication, count, topology.PlanOptions{DataCenter: dc})
	short := "" // why the volumes get fewer copies than the code asks for
	if p := s.topo.WritePolicyFor(key.Collection); err != nil && p.Degraded && errors.Is(err, topology.ErrNoPlacement) {
		// Degraded: place the copies that can be (at least minCopies);
		// the volumes are under-replicated from the start and the rest
		// are placed when the servers are back (replaceMissing).
		var reduced replication.Code
		var serr error
		if plans, reduced, serr = s.topo.PlanShortGrowth(key.Replication, count, p.MinCopies, topology.PlanOptions{DataCenter: dc}); serr == nil {
			short = fmt.Sprintf("no placement for code %s (%v); placed as %s", key.Replication, err, reduced)
			s.log.Warn("growing under-replicated volumes under the degraded write policy", "layout", key.String(), "placedAs", reduced.String(), "why", err)
			err = nil
		}
	}
	if err != nil {
		return nil, err
	}
	first, err := s.cons.NextVolumeIDs(ctx, len(plans))
	if err != nil {
		return nil, err
	}
	s.raiseKnownMax(first + uint32(len(plans)) - 1)

	type outcome struct {
		vid uint32
		err error
	}
	results := make([]outcome, len(plans))
	var wg sync.WaitGroup
	for i, p := range plans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vid := first + uint32(i)
			err := s.allocate(ctx, vid, key, p)
			if err == nil && short != "" {
				s.topo.NoteGrownShort(vid, short, time.Now())
			}
			results[i] = outcome{vid, err}
		}()
	}
	wg.Wait()
	var grown []uint32
	var errs []error
	for _, r := range results {
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		grown = append(grown, r.vid)
	}
	failed := errors.Join(errs...)
	if pause := s.growthBackoff.record(name, failed, time.Now()); pause > 0 {
		s.log.Warn("volume growth failed; automatic growth paused", "layout", name, "grown", len(grown), "failed", len(errs), "pause", pause, "err", failed)
	}
	if len(grown) == 0 {
		return nil, fmt.Errorf("%w: %w", ErrGrowthFailed, failed)
	}
	s.log.Info("grew volumes", "layout", key.String(), "volumes", grown)
	return grown, nil
}

// allocate creates one volume on every server of its plan and registers it
// in the topology at once, so the assign that asked for it can use it.
func (s *Server) allocate(ctx context.Context, vid uint32, key topology.LayoutKey, p topology.Plan) error {
	var wg sync.WaitGroup
	errs := make([]error, len(p.Locations))
	copies := make([]topology.NewCopy, len(p.Locations))
	for i, loc := range p.Locations {
		wg.Add(1)
		go func() {
			defer wg.Done()
			copies[i], errs[i] = s.volumeClients.allocate(ctx, loc, vid, key)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		err = fmt.Errorf("volume %d on %s: %w", vid, strings.Join(p.URLs(), ","), err)
		var made, maybe []topology.Location
		for i, e := range errs {
			switch {
			case e == nil:
				made = append(made, p.Locations[i])
			case mayExist(e):
				maybe = append(maybe, p.Locations[i])
			}
		}
		if len(made)+len(maybe) > 0 {
			s.rollBack(ctx, vid, made, maybe, err)
		}
		return err
	}
	return s.topo.RegisterVolume(topology.Volume{
		ID: vid, Collection: key.Collection, Replication: key.Replication, TTL: key.TTL,
	}, copies)
}

// raiseKnownMax records a committed volume id so that heartbeats reporting it
// do not cause a raft Apply.
func (s *Server) raiseKnownMax(vid uint32) {
	for {
		cur := s.maxVID.Load()
		if vid <= cur || s.maxVID.CompareAndSwap(cur, vid) {
			return
		}
	}
}

// noteVolumeIDs makes sure the raft state knows a volume id seen on disk.
func (s *Server) noteVolumeIDs(ctx context.Context, maxVID uint32) {
	if maxVID <= s.maxVID.Load() || !s.cons.IsLeader() {
		return
	}
	if err := s.cons.RaiseVolumeID(ctx, maxVID); err != nil {
		s.log.Warn("raise max volume id", "id", maxVID, "err", err)
		return
	}
	s.raiseKnownMax(maxVID)
}
