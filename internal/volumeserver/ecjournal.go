package volumeserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/kelpfs/kelp/internal/erasure"
	"github.com/kelpfs/kelp/internal/security"
)

// Deletes of an EC volume while a holder is away.
//
// A delete stands once every holder that answers journaled it and those
// holders hold at least k distinct shards (forwardECDelete); a holder that
// could not be reached missed it. Such a holder must not serve the needle
// again, so an EC volume is "stale" here from the moment this server starts
// (it may have been down) and from each reconnection to the master after the
// heartbeat stream broke (it may have been cut off), until it has merged the
// journals of its peers (ecCatchUp). While stale it answers needle reads with
// 503 (the client tries another holder) after one catch-up attempt; it still
// serves raw shard ranges, which deletes do not change, and takes deletes.
//
// Caught up means: the journals merged come from peers holding every shard
// but fewer than k of those this server does not hold. The holders that
// journaled any acknowledged delete hold at least k shards, so at least one
// of them was merged. When fewer peers answer, merging from every peer the
// master lists also counts (the others are gone, and with them any way to
// read the needles they could vouch for).

// ecCatchUpTimeout bounds one catch-up attempt made for a read.
const ecCatchUpTimeout = 3 * time.Second

// staleHeader marks the journal of a holder that has not caught up itself.
const staleHeader = "X-Kelp-Journal-Stale"

// markECStale marks every EC volume here as needing a catch-up.
func (s *Server) markECStale() {
	for _, d := range s.store.Status() {
		for _, e := range d.EcShards {
			s.ecStale.LoadOrStore(e.ID, &sync.Mutex{})
		}
	}
}

// ecStaleCount is how many EC volumes here wait for a catch-up.
func (s *Server) ecStaleCount() int {
	n := 0
	s.ecStale.Range(func(any, any) bool { n++; return true })
	return n
}

// ecReady reports whether EC volume vid may serve needle reads here,
// trying one catch-up first when it is stale.
func (s *Server) ecReady(ctx context.Context, vid uint32) bool {
	m, stale := s.ecStale.Load(vid)
	if !stale {
		return true
	}
	mu := m.(*sync.Mutex)
	mu.Lock()
	defer mu.Unlock()
	if _, still := s.ecStale.Load(vid); !still {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, ecCatchUpTimeout)
	defer cancel()
	if err := s.ecCatchUp(ctx, vid); err != nil {
		s.log.Warn("EC volume not caught up on deletes yet", "volume", vid, "err", err)
		return false
	}
	return true
}

// ecCatchUp merges the delete journals of vid's other holders into this
// one's and, when they are enough (see above), marks the volume current.
func (s *Server) ecCatchUp(ctx context.Context, vid uint32) error {
	ev, ok := s.store.EcVolume(vid)
	if !ok {
		s.ecStale.Delete(vid)
		return nil
	}
	if s.client == nil {
		s.ecStale.Delete(vid)
		return nil
	}
	s.client.Invalidate(vid)
	locs, err := s.client.Lookup(ctx, vid)
	if err != nil {
		return fmt.Errorf("locating the holders of EC volume %d: %w", vid, err)
	}
	var merged erasure.ShardSet
	peers, reached, added := 0, 0, 0
	var errs []error
	for _, l := range locs {
		if l.URL == s.URL() || l.EcShards == 0 {
			continue
		}
		peers++
		keys, stale, err := s.fetchJournal(ctx, l.URL, vid)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", l.URL, err))
			continue
		}
		n, err := ev.MergeDeletes(keys)
		added += n
		if err != nil {
			return err
		}
		if !stale {
			merged |= erasure.ShardSet(l.EcShards)
			reached++
		}
	}
	if added > 0 {
		s.notifyChange()
	}
	sc := ev.Layout().Scheme
	others := erasure.ShardSet(1<<sc.Total()-1) &^ ev.Shards()
	unseen := others &^ merged
	if unseen.Count() >= sc.Data && reached < peers {
		return fmt.Errorf("journals merged from holders of shards %s only (%d of %d peers): %w", merged, reached, peers, errors.Join(errs...))
	}
	s.ecStale.Delete(vid)
	s.log.Info("EC volume caught up on deletes", "volume", vid, "merged", added, "peers", reached)
	return nil
}

// fetchJournal reads the delete journal of vid from another holder.
func (s *Server) fetchJournal(ctx context.Context, url string, vid uint32) (keys []uint64, stale bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/ec/journal?volume=%d", security.URL(url), vid), nil)
	if err != nil {
		return nil, false, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
	if err != nil {
		return nil, false, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, false, fmt.Errorf("%s: %s", resp.Status, b)
	}
	keys, _ = erasure.ParseJournal(b)
	return keys, resp.Header.Get(staleHeader) != "", nil
}

// handleJournalRead serves GET /ec/journal?volume=V: the EC volume's delete
// journal (.ecj) as held here; the X-Kelp-Journal-Stale header is set while
// this holder has not caught up itself.
func (s *Server) handleJournalRead(w http.ResponseWriter, r *http.Request) {
	vid, err := strconv.ParseUint(r.URL.Query().Get("volume"), 10, 32)
	if err != nil {
		writeError(w, http.StatusBadRequest, "want volume")
		return
	}
	f, err := s.store.EcFile(uint32(vid), ".ecj")
	if err != nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("EC volume %d not on %s", vid, s.URL()))
		return
	}
	defer f.Close()
	size, err := f.Size()
	b := make([]byte, max(size, 0))
	if err == nil && size > 0 {
		_, err = f.ReadAt(b, 0)
	}
	if err != nil {
		s.writeDomainError(w, r, err)
		return
	}
	if _, stale := s.ecStale.Load(uint32(vid)); stale {
		w.Header().Set(staleHeader, "1")
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Write(b)
}

// ecCatchUpLoop catches stale EC volumes up in the background, so that
// they serve reads again without waiting for one.
func (s *Server) ecCatchUpLoop(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var ids []uint32
		s.ecStale.Range(func(k, _ any) bool { ids = append(ids, k.(uint32)); return true })
		for _, id := range ids {
			s.ecReady(ctx, id)
		}
	}
}
