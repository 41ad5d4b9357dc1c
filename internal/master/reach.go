package master

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/pb/volumepb"
	"github.com/kelpfs/kelp/internal/topology"
)

// A heartbeat proves that a volume server can reach the master, not that
// the master (or a client) can reach it: a server bound to an address it no
// longer has keeps heartbeating while every write to it fails. So every
// master probes every volume server it knows at its advertised gRPC address,
// once a pulse, and marks the ones that fail probesToMark times in a row
// unreachable in its topology (topology.SetReachable) until a probe succeeds.
// Every master probes, not only the leader, so that a newly elected leader
// and a follower's /cluster/status have their own fresh view.
//
// The probe is a VolumeStatus call for volume 0 on the pooled connection the
// master also allocates through: any answer from the server (NotFound,
// Unimplemented) proves it reachable; only a transport failure or the
// deadline counts. The data port is not probed separately: it is on the same
// advertised host, and the binding fix makes both listen on all interfaces.
const probesToMark = 3

// probeTimeout bounds one probe: a pulse, within [1s, 2s], so that a
// black-holed server is noticed within a few seconds and a slow but healthy
// one on a loaded machine (a CI run on two busy cores) is not.
func (s *Server) probeTimeout() time.Duration {
	return min(max(s.cfg.PulseInterval, time.Second), 2*time.Second)
}

// prober remembers consecutive failed probes and which probes are running;
// a server's next probe starts only after its last one ended, so a
// black-holed server never piles up goroutines.
type prober struct {
	mu       sync.Mutex
	failures map[string]int
	running  map[string]bool
}

// probeLoop probes the volume servers and retries the deletes of abandoned
// copies (growth.go) once a pulse.
func (s *Server) probeLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.PulseInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.probeAll()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.retryAbandoned()
			}()
		}
	}
}

// probeAll starts a probe of every known volume server not being probed yet
// and forgets the servers that left. It never waits for a probe.
func (s *Server) probeAll() {
	nodes := s.topo.Nodes(false)
	p := &s.prober
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running == nil {
		p.failures, p.running = map[string]int{}, map[string]bool{}
	}
	known := map[string]bool{}
	for _, n := range nodes {
		known[n.URL] = true
		if p.running[n.URL] {
			continue
		}
		p.running[n.URL] = true
		loc := topology.Location{URL: n.URL, GRPCPort: n.GRPCPort}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.probeOne(loc)
		}()
	}
	for url := range p.failures {
		if !known[url] {
			delete(p.failures, url)
		}
	}
}

func (s *Server) probeOne(loc topology.Location) {
	err := s.volumeClients.probe(s.ctx, loc, s.probeTimeout())
	if s.ctx.Err() != nil {
		return // shutting down: the failure is ours
	}
	p := &s.prober
	p.mu.Lock()
	delete(p.running, loc.URL)
	if err == nil {
		delete(p.failures, loc.URL)
	} else {
		p.failures[loc.URL]++
	}
	failures := p.failures[loc.URL]
	p.mu.Unlock()
	now := time.Now()
	switch {
	case err == nil:
		if s.topo.SetReachable(loc.URL, true, "", now) {
			s.log.Info("volume server reachable again", "node", loc.URL)
		}
	case failures >= probesToMark:
		if s.topo.SetReachable(loc.URL, false, err.Error(), now) {
			s.log.Warn("volume server sends heartbeats but cannot be reached; its copies count as missing",
				"node", loc.URL, "probes", failures, "err", err)
		}
	}
}

// probe checks that the volume server answers at its advertised gRPC
// address within timeout.
func (c *volumeClients) probe(ctx context.Context, loc topology.Location, timeout time.Duration) error {
	addr, err := grpcAddr(loc)
	if err != nil {
		return err
	}
	cc, err := c.conn(addr)
	if err != nil {
		return err
	}
	// A connection that failed waits out gRPC's reconnect backoff (up to
	// two minutes) before it tries again; the probe must see a server the
	// moment it is back.
	if cc.GetState() == connectivity.TransientFailure {
		cc.ResetConnectBackoff()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err = volumepb.NewVolumeServerClient(cc).VolumeStatus(ctx, &volumepb.VolumeStatusRequest{VolumeId: 0}, grpc.WaitForReady(true))
	switch status.Code(err) {
	case codes.OK:
		return nil
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("master: probe of %s got no answer within %v: %w", addr, timeout, err)
		}
		return err
	default:
		return nil // the server answered
	}
}
