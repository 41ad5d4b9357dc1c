package master

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kelpfs/kelp/internal/pb/volumepb"
	"github.com/kelpfs/kelp/internal/security"
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

// newHealer's catch-up requests go through dial (nil: TCP).
func newHealer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *healer {
	tr := tlsTransport()
	if dial != nil {
		tr.DialContext = dial
	}
	return &healer{inflight: map[uint32]bool{}, sem: make(chan struct{}, maxCatchUps), http: &http.Client{Timeout: 30 * time.Minute, Transport: tr}}
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
		s.commitDeficits()  // adopts the committed records first on a new leader
		s.adoptPresent()
		s.healOnce()
		s.replaceMissing()
	}
}

// healOnce starts a catch-up for every under-replicated volume with a copy
// behind and a good copy to copy from, unless one runs already.
func (s *Server) healOnce() {
	for _, d := range s.topo.Deficits() {
		if len(d.Behind) == 0 || len(d.Good) == 0 || d.Waiting {
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
		good := s.topo.CaughtUpSince(d.VolumeID, loc.URL, d.Epoch, n, err, time.Now())
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
	u := security.URL(target) + "/sync/pull?" + url.Values{"volume": {strconv.FormatUint(uint64(vid), 10)}, "from": {from}}.Encode()
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

// defaultReplaceAfter is Config.ReplaceAfter's default: long enough for a
// server restart or a short outage, after which the copy is caught up
// rather than copied whole.
const defaultReplaceAfter = 5 * time.Minute

func (s *Server) replaceAfter() time.Duration {
	if s.cfg.ReplaceAfter == 0 {
		return defaultReplaceAfter
	}
	return s.cfg.ReplaceAfter
}

// adoptPresent gives up waiting for the good copies of volumes none of
// whose copies known to hold every write has been present for ReplaceAfter
// (topology.AdoptPresentCopies): the present copies become good.
func (s *Server) adoptPresent() {
	after := s.replaceAfter()
	if after < 0 {
		return
	}
	for _, vid := range s.topo.AdoptPresentCopies(time.Now(), after) {
		s.log.Warn("no copy known to hold every write of an under-replicated volume returned; the present copies were adopted as good",
			"volume", vid, "waited", after)
	}
}

// replaceMissing places a new copy of every degraded-policy volume whose
// copy has been missing (not behind: gone) for longer than ReplaceAfter, on
// a server the replication code allows, by copying the volume from a good
// copy (CopyVolume). The new copy then counts as behind and is caught up
// like a returning one. Nothing is ever deleted here.
func (s *Server) replaceMissing() {
	after := s.replaceAfter()
	if after < 0 {
		return
	}
	var due []topology.VolumeDeficit
	for _, d := range s.topo.Deficits() {
		if d.Missing > 0 && len(d.Behind) == 0 && len(d.Good) > 0 && !d.Waiting && (d.GrownShort || time.Since(d.Since) > after) {
			due = append(due, d)
		}
	}
	if len(due) == 0 {
		return
	}
	var nodes []topology.NodeInfo
	for _, n := range s.topo.Nodes(true) {
		if !n.Reachable {
			continue // nothing is placed on a server the master cannot reach
		}
		nodes = append(nodes, topology.NodeInfo{URL: n.URL, PublicURL: n.PublicURL, GRPCPort: n.GRPCPort, DataCenter: n.DataCenter, Rack: n.Rack, Disks: n.Disks})
	}
	plan := topology.PlanReplicationFix(nodes)
	byURL := map[string]topology.NodeInfo{}
	for _, n := range nodes {
		byURL[n.URL] = n
	}
	for _, d := range due {
		for _, st := range plan.Steps {
			if st.Action != topology.StepCopy || st.VolumeID != d.VolumeID {
				continue
			}
			s.heal.mu.Lock()
			busy := s.heal.inflight[d.VolumeID]
			if !busy {
				s.heal.inflight[d.VolumeID] = true
			}
			s.heal.mu.Unlock()
			if busy {
				break
			}
			src, dst := byURL[st.Source], byURL[st.Node]
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer func() {
					s.heal.mu.Lock()
					delete(s.heal.inflight, d.VolumeID)
					s.heal.mu.Unlock()
				}()
				start := time.Now()
				if err := s.copyWhole(s.ctx, d.VolumeID, src, dst); err != nil {
					s.log.Warn("could not place a replacement copy of an under-replicated volume", "volume", d.VolumeID, "from", src.URL, "to", dst.URL, "err", err)
					return
				}
				s.log.Info("placed a replacement copy of an under-replicated volume", "volume", d.VolumeID, "from", src.URL, "to", dst.URL,
					"dataCenter", dst.DataCenter, "took", time.Since(start).Round(time.Millisecond))
			}()
			break // one copy per volume per round; the next round sees the rest
		}
	}
}

// copyWhole makes dst pull the volume from src (volume server CopyVolume).
func (s *Server) copyWhole(ctx context.Context, vid uint32, src, dst topology.NodeInfo) error {
	srcAddr, err := grpcAddr(topology.Location{URL: src.URL, GRPCPort: src.GRPCPort})
	if err != nil {
		return err
	}
	dstAddr, err := grpcAddr(topology.Location{URL: dst.URL, GRPCPort: dst.GRPCPort})
	if err != nil {
		return err
	}
	cc, err := s.volumeClients.conn(dstAddr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	stream, err := volumepb.NewVolumeServerClient(cc).CopyVolume(ctx, &volumepb.CopyVolumeRequest{VolumeId: vid, SourceGrpcAddr: srcAddr})
	if err != nil {
		return err
	}
	for {
		msg, err := stream.Recv()
		if err != nil {
			return err
		}
		if msg.GetDone() {
			return nil
		}
	}
}

// tlsTransport is http.DefaultTransport with the process's TLS (nil: none).
func tlsTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = security.Process().ClientConfig()
	return tr
}
