package master

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kelpfs/kelp/internal/pb"
)

// Automatic EC rebuild (Config.EcRebuildAfter, --ec.rebuild-after).
//
// The leader watches the erasure-coded volumes of its topology. A volume
// with shards no live server holds is "missing" from the moment the master
// sees it so (a holder is dropped after 3 silent pulses); once it has been
// missing for EcRebuildAfter, the leader runs the shell's own
// `ec.rebuild -volumeId=N -force` under the admin lock, as an operator
// would: same plan (topology.ShardPlacer), same checks (holders probed,
// journals merged, each rebuilt shard verified on its new holder). A held
// admin lock (an operator at work) makes it wait for the next round. The
// rebuild's output goes to the log; /cluster/status shows what waits and
// what runs (EcRepairStatus).

// EcRepairStatus is the automatic EC rebuild's state in /cluster/status.
type EcRepairStatus struct {
	RebuildAfter string          `json:"rebuildAfter"` // "0s": manual only
	Waiting      []EcRepairEntry `json:"waiting,omitempty"`
	Running      uint32          `json:"running,omitempty"` // volume being rebuilt
	Progress     string          `json:"progress,omitempty"`
	Last         string          `json:"last,omitempty"` // outcome of the last run
}

// EcRepairEntry is one EC volume with missing shards.
type EcRepairEntry struct {
	Volume       uint32    `json:"volume"`
	MissingSince time.Time `json:"missingSince"`
	Due          time.Time `json:"due"`
}

type ecRepair struct {
	mu       sync.Mutex
	since    map[uint32]time.Time
	running  uint32
	progress *lineTail
	last     string
}

// lineTail keeps the last line written to it.
type lineTail struct {
	mu   sync.Mutex
	last string
	buf  bytes.Buffer
}

func (l *lineTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	text := strings.TrimRight(l.buf.String(), "\n\r")
	if i := strings.LastIndexAny(text, "\n\r"); i >= 0 {
		text = text[i+1:]
	}
	if text != "" {
		l.last = text
	}
	if l.buf.Len() > 64<<10 {
		l.buf.Reset()
	}
	return len(p), nil
}

func (l *lineTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

func (l *lineTail) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (s *Server) ecRepairStatus() *EcRepairStatus {
	if s.cfg.EcRebuildAfter <= 0 {
		return nil
	}
	r := &s.ecRepair
	r.mu.Lock()
	defer r.mu.Unlock()
	st := &EcRepairStatus{RebuildAfter: s.cfg.EcRebuildAfter.String(), Running: r.running, Last: r.last}
	if r.progress != nil {
		st.Progress = r.progress.String()
	}
	for id, t := range r.since {
		st.Waiting = append(st.Waiting, EcRepairEntry{Volume: id, MissingSince: t, Due: t.Add(s.cfg.EcRebuildAfter)})
	}
	return st
}

// ecRepairLoop runs on every master; only the leader acts.
func (s *Server) ecRepairLoop() {
	defer s.wg.Done()
	if s.cfg.EcRebuildAfter <= 0 {
		return
	}
	tick := max(min(s.cfg.EcRebuildAfter/4, s.cfg.PulseInterval), 50*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	r := &s.ecRepair
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-t.C:
			r.mu.Lock()
			if r.since == nil {
				r.since = map[uint32]time.Time{}
			}
			if !s.cons.IsLeader() {
				clear(r.since)
				r.mu.Unlock()
				continue
			}
			seen := map[uint32]bool{}
			var due []uint32
			for _, e := range s.topo.EcStatus() {
				if len(e.Missing) == 0 {
					continue
				}
				seen[e.ID] = true
				if _, ok := r.since[e.ID]; !ok {
					r.since[e.ID] = now
					s.log.Warn("EC volume is missing shards; automatic rebuild scheduled",
						"volume", e.ID, "missing", e.Missing, "after", s.cfg.EcRebuildAfter)
				}
				if now.Sub(r.since[e.ID]) >= s.cfg.EcRebuildAfter && e.Readable {
					due = append(due, e.ID)
				}
			}
			for id := range r.since {
				if !seen[id] {
					delete(r.since, id)
				}
			}
			busy := r.running != 0
			r.mu.Unlock()
			if busy || len(due) == 0 {
				continue
			}
			// One volume per round, the longest waiting first.
			r.mu.Lock()
			pick := due[0]
			for _, id := range due {
				if r.since[id].Before(r.since[pick]) {
					pick = id
				}
			}
			r.running = pick
			r.progress = &lineTail{}
			r.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.ecRebuildNow(pick)
			}()
		}
	}
}

// ecRebuildNow runs ec.rebuild for one volume through the shell.
func (s *Server) ecRebuildNow(vid uint32) {
	r := &s.ecRepair
	r.mu.Lock()
	out := r.progress
	r.mu.Unlock()
	s.log.Info("automatic EC rebuild starts", "volume", vid)
	err := s.runShell(out, fmt.Sprintf("lock\nec.rebuild -volumeId=%d -force\nunlock", vid))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running = 0
	if err != nil {
		r.last = fmt.Sprintf("volume %d: rebuild failed at %s: %v", vid, time.Now().UTC().Format(time.RFC3339), err)
		s.log.Error("automatic EC rebuild failed; retried next round", "volume", vid, "err", err, "output", out.all())
		return
	}
	r.last = fmt.Sprintf("volume %d: rebuilt at %s", vid, time.Now().UTC().Format(time.RFC3339))
	s.log.Info("automatic EC rebuild done", "volume", vid, "output", out.all())
	delete(r.since, vid)
}

// runShell runs a shell script against this master (Config.RunShell).
func (s *Server) runShell(out *lineTail, script string) error {
	if s.cfg.RunShell == nil {
		return fmt.Errorf("master: no shell to run ec.rebuild with (Config.RunShell)")
	}
	ctx, cancel := context.WithTimeout(s.ctx, time.Hour)
	defer cancel()
	addr := s.httpAddr + "." + strconv.Itoa(pb.Port(s.grpcLn))
	return s.cfg.RunShell(ctx, addr, "master "+s.httpAddr+" (ec.rebuild-after)", out, script)
}
