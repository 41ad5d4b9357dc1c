package master

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kelpfs/kelp/internal/topology"
)

// Self-healing of under-replicated volumes (write policy "degraded", see
// topology.WritePolicy). The leader looks at the deficits every heal tick:
// for each copy that is present and reachable but behind (its server was
// lost or cut off while the volume took writes, and is back), it asks that
// server to catch up from a good copy (POST /sync/pull on the volume server:
// only the needles it lacks and the deletes it missed are copied). A pass
// that finds nothing left to copy makes the copy good; once every copy the
// replication code asks for is good the deficit ends and the volume takes
// writes on all its copies again. No restart and no command are needed;
// volume.fix.replication stays for manual repairs.

// healInterval is how often the leader looks for copies to catch up.
func (s *Server) healInterval() time.Duration {
	return min(max(s.cfg.PulseInterval/2, 50*time.Millisecond), time.Second)
}

// maxCatchUps bounds the catch-ups run at once by one master.
const maxCatchUps = 4

type healer struct {
	// copied counts needles copied and deletes applied by catch-ups, caught
	// the copies that became good, since this master started.
	copied, caught atomic.Uint64

	mu       sync.Mutex
	inflight map[uint32]bool
	sem      chan struct{}
	http     *http.Client
}

func newHealer() *healer {
	return &healer{inflight: map[uint32]bool{}, sem: make(chan struct{}, maxCatchUps), http: &http.Client{Timeout: 30 * time.Minute}}
}

func (s *Server) healLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.healInterval())
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		if !s.cons.IsLeader() {
			continue
		}
		s.currentSettings() // write policies reach the topology
		s.healOnce()
	}
}

// healOnce starts a catch-up for every under-replicated volume with a copy
// behind and a good copy to copy from, unless one runs already.
func (s *Server) healOnce() {
	for _, d := range s.topo.Deficits() {
		if len(d.Behind) == 0 || len(d.Good) == 0 {
			continue
		}
		s.heal.mu.Lock()
		busy := s.heal.inflight[d.VolumeID]
		if !busy {
			s.heal.inflight[d.VolumeID] = true
		}
		s.heal.mu.Unlock()
		if busy {
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				s.heal.mu.Lock()
				delete(s.heal.inflight, d.VolumeID)
				s.heal.mu.Unlock()
			}()
			select {
			case s.heal.sem <- struct{}{}:
			case <-s.ctx.Done():
				return
			}
			defer func() { <-s.heal.sem }()
			s.catchUpVolume(d)
		}()
	}
}

// catchUpVolume brings every copy of d that is behind level with a good one.
func (s *Server) catchUpVolume(d topology.VolumeDeficit) {
	from := d.Good[0]
	for _, loc := range d.Behind {
		start := time.Now()
		n, err := s.pull(s.ctx, loc.URL, d.VolumeID, from)
		if s.ctx.Err() != nil {
			return
		}
		good := s.topo.CaughtUp(d.VolumeID, loc.URL, n, err, time.Now())
		s.heal.copied.Add(n)
		if good {
			s.heal.caught.Add(1)
		}
		switch {
		case err != nil:
			s.log.Warn("catch-up of an under-replicated copy failed; retrying", "volume", d.VolumeID, "copy", loc.URL, "from", from, "err", err)
		case n > 0:
			s.log.Info("catching up an under-replicated copy", "volume", d.VolumeID, "copy", loc.URL, "dataCenter", loc.DataCenter,
				"from", from, "copied", n, "took", time.Since(start).Round(time.Millisecond))
		case good:
			s.log.Info("copy caught up", "volume", d.VolumeID, "copy", loc.URL, "dataCenter", loc.DataCenter, "underReplicatedFor", time.Since(d.Since).Round(time.Millisecond))
		}
	}
}

// pull asks the volume server at target to catch its copy of vid up with the
// copy at from; it returns how many needles and deletes were applied.
func (s *Server) pull(ctx context.Context, target string, vid uint32, from string) (uint64, error) {
	u := "http://" + target + "/sync/pull?" + url.Values{"volume": {strconv.FormatUint(uint64(vid), 10)}, "from": {from}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.heal.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s", resp.Status, body)
	}
	var res struct {
		Copied  uint64 `json:"copied"`
		Deleted uint64 `json:"deleted"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return 0, fmt.Errorf("catch-up answer: %w", err)
	}
	return res.Copied + res.Deleted, nil
}

// HealStats counts the self-healing work of this master since it started.
type HealStats struct {
	// NeedlesCopied counts needles copied and deletes applied to copies
	// that were behind; CopiesCaughtUp the copies that became good.
	NeedlesCopied  uint64 `json:"needlesCopied"`
	CopiesCaughtUp uint64 `json:"copiesCaughtUp"`
}

func (s *Server) healStats() HealStats {
	return HealStats{NeedlesCopied: s.heal.copied.Load(), CopiesCaughtUp: s.heal.caught.Load()}
}
