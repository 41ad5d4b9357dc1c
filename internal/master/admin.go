package master

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"time"

	"github.com/kelpfs/kelp/internal/consensus"
	"github.com/kelpfs/kelp/internal/erasure"
	"github.com/kelpfs/kelp/internal/pb/masterpb"
	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/topology"
)

// maxAdminLease bounds a requested lease: a forgotten shell must not hold the
// cluster for days.
const maxAdminLease = time.Hour

// leaseAdminLock takes (token 0) or renews the admin lock. Leader only.
func (s *Server) leaseAdminLock(ctx context.Context, owner string, token uint64, lease time.Duration) (consensus.AdminLock, error) {
	if owner == "" {
		return consensus.AdminLock{}, fmt.Errorf("%w: the admin lock needs an owner", ErrBadRequest)
	}
	if lease == 0 {
		lease = s.cfg.AdminLockLease
	}
	if lease < 0 || lease > maxAdminLease {
		return consensus.AdminLock{}, fmt.Errorf("%w: lease %v must be between 0 and %v", ErrBadRequest, lease, maxAdminLease)
	}
	if !s.cons.IsLeader() {
		return consensus.AdminLock{}, s.notLeader()
	}
	return s.cons.AcquireAdminLock(ctx, owner, token, lease, time.Now())
}

func (s *Server) releaseAdminLock(ctx context.Context, owner string, token uint64) error {
	if !s.cons.IsLeader() {
		return s.notLeader()
	}
	return s.cons.ReleaseAdminLock(ctx, owner, token)
}

// configure sets the default replication of the cluster (collection "") or
// of one collection; an empty replication changes nothing but still checks
// the token. The lock is checked in the state machine, atomically with the
// change. It returns the settings after the change.
func (s *Server) configure(ctx context.Context, token uint64, collection, repl, ecScheme, writePolicy string, minCopies int) (consensus.Settings, error) {
	if token == 0 {
		return consensus.Settings{}, fmt.Errorf("%w: configure needs the admin lock (run lock first)", consensus.ErrNotLockOwner)
	}
	if err := checkCollection(collection); err != nil {
		return consensus.Settings{}, err
	}
	u := consensus.SettingsUpdate{LockToken: token, Now: time.Now()}
	if repl != "" {
		code, err := replication.Parse(repl)
		if err != nil {
			return consensus.Settings{}, err
		}
		canonical := code.String()
		if collection == "" {
			u.DefaultReplication = &canonical
		} else {
			u.CollectionReplication = map[string]string{collection: canonical}
		}
	}
	if ecScheme != "" {
		sc, err := erasure.ParseScheme(ecScheme)
		if err != nil {
			return consensus.Settings{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
		u.EcScheme = map[string]string{collection: sc.String()}
	}
	if writePolicy != "" || minCopies != 0 {
		if writePolicy == "" {
			return consensus.Settings{}, fmt.Errorf("%w: minCopies needs writePolicy=degraded", ErrBadRequest)
		}
		p, err := topology.ParseWritePolicy(writePolicy, minCopies)
		if err != nil {
			return consensus.Settings{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
		u.WritePolicy = map[string]string{collection: p.String()}
	}
	if !s.cons.IsLeader() {
		return consensus.Settings{}, s.notLeader()
	}
	if err := s.cons.UpdateSettings(ctx, u); err != nil {
		return consensus.Settings{}, err
	}
	s.refreshSettings()
	s.log.Info("settings changed", "collection", collection, "replication", repl, "ecScheme", ecScheme, "writePolicy", writePolicy, "minCopies", minCopies)
	return *s.currentSettings(), nil
}

// reportVolumeFailure takes a volume out of assigns after a volume server
// failed to write one of its copies.
func (s *Server) reportVolumeFailure(ctx context.Context, vid uint32, failedURL, cause string, unreachable bool) error {
	if vid == 0 {
		return fmt.Errorf("%w: volume id 0", ErrBadRequest)
	}
	if !s.cons.IsLeader() {
		return s.notLeader()
	}
	// Committed before the answer: under the degraded policy the write may
	// stand without that copy, and the next leader must know it is behind.
	if err := s.updateDeficits(ctx, func() error {
		return s.topo.ReportFailure(vid, failedURL, cause, unreachable, time.Now())
	}); err != nil {
		return err
	}
	s.log.Warn("replicated write failed; volume taken out of assigns", "volume", vid, "copy", failedURL, "err", cause)
	return nil
}

// topologyPB is the whole tree and the settings, as the Topology RPC answers.
func (s *Server) topologyPB() *masterpb.TopologyResponse {
	set := s.currentSettings()
	resp := &masterpb.TopologyResponse{
		VolumeSizeLimit: set.VolumeSizeLimit, DefaultReplication: set.DefaultReplication,
		CollectionReplication: maps.Clone(set.CollectionReplication), EcScheme: maps.Clone(set.EcScheme),
		WritePolicy: maps.Clone(set.WritePolicy),
	}
	for _, dc := range s.topo.Status().DataCenters {
		pdc := &masterpb.DataCenter{Id: dc.Name}
		for _, r := range dc.Racks {
			pr := &masterpb.Rack{Id: r.Name}
			for _, n := range r.Nodes {
				pr.Nodes = append(pr.Nodes, &masterpb.Node{
					Url: n.URL, PublicUrl: n.PublicURL, GrpcPort: uint32(n.GRPCPort),
					Disks: disksToPB(n.Disks), LastSeenUnixMs: n.LastHeartbeat.UnixMilli(),
				})
			}
			pdc.Racks = append(pdc.Racks, pr)
		}
		resp.DataCenters = append(resp.DataCenters, pdc)
	}
	return resp
}

// gRPC forms. Each is served by the leader; followers forward.

func (g *grpcService) LeaseAdminLock(ctx context.Context, req *masterpb.LeaseAdminLockRequest) (*masterpb.LeaseAdminLockResponse, error) {
	if resp, handled, err := forward(g.s, ctx, req, masterpb.MasterClient.LeaseAdminLock); handled {
		return resp, err
	}
	l, err := g.s.leaseAdminLock(ctx, req.GetOwner(), req.GetPreviousToken(), time.Duration(req.GetLeaseMs())*time.Millisecond)
	if err != nil {
		return nil, grpcError(err)
	}
	return &masterpb.LeaseAdminLockResponse{Token: l.Token, ExpiresUnixMs: l.ExpiresAt.UnixMilli()}, nil
}

func (g *grpcService) ReleaseAdminLock(ctx context.Context, req *masterpb.ReleaseAdminLockRequest) (*masterpb.ReleaseAdminLockResponse, error) {
	if resp, handled, err := forward(g.s, ctx, req, masterpb.MasterClient.ReleaseAdminLock); handled {
		return resp, err
	}
	if err := g.s.releaseAdminLock(ctx, req.GetOwner(), req.GetToken()); err != nil {
		return nil, grpcError(err)
	}
	return &masterpb.ReleaseAdminLockResponse{}, nil
}

func (g *grpcService) Configure(ctx context.Context, req *masterpb.ConfigureRequest) (*masterpb.ConfigureResponse, error) {
	if resp, handled, err := forward(g.s, ctx, req, masterpb.MasterClient.Configure); handled {
		return resp, err
	}
	set, err := g.s.configure(ctx, req.GetLockToken(), req.GetCollection(), req.GetReplication(), req.GetEcScheme(), req.GetWritePolicy(), int(req.GetMinCopies()))
	if err != nil {
		return nil, grpcError(err)
	}
	return &masterpb.ConfigureResponse{DefaultReplication: set.DefaultReplication, CollectionReplication: maps.Clone(set.CollectionReplication),
		EcScheme: maps.Clone(set.EcScheme), WritePolicy: maps.Clone(set.WritePolicy)}, nil
}

func (g *grpcService) Topology(ctx context.Context, req *masterpb.TopologyRequest) (*masterpb.TopologyResponse, error) {
	if resp, handled, err := forward(g.s, ctx, req, masterpb.MasterClient.Topology); handled {
		return resp, err
	}
	return g.s.topologyPB(), nil
}

func (g *grpcService) ReportVolumeFailure(ctx context.Context, req *masterpb.ReportVolumeFailureRequest) (*masterpb.ReportVolumeFailureResponse, error) {
	if resp, handled, err := forward(g.s, ctx, req, masterpb.MasterClient.ReportVolumeFailure); handled {
		return resp, err
	}
	if w := req.GetWrittenUrls(); len(w) > 0 {
		if req.GetVolumeId() == 0 {
			return nil, grpcError(fmt.Errorf("%w: volume id 0", ErrBadRequest))
		}
		if !g.s.cons.IsLeader() {
			return nil, grpcError(g.s.notLeader())
		}
		// The write is acknowledged once this answer arrives: the copies
		// that missed it are recorded in raft first (deficits.go).
		if err := g.s.updateDeficits(ctx, func() error {
			return g.s.topo.ReportDegradedWrite(req.GetVolumeId(), w, time.Now())
		}); err != nil {
			return nil, grpcError(err)
		}
		if req.GetFailedUrl() == "" {
			return &masterpb.ReportVolumeFailureResponse{}, nil
		}
	}
	if err := g.s.reportVolumeFailure(ctx, req.GetVolumeId(), req.GetFailedUrl(), req.GetError(), req.GetUnreachable()); err != nil {
		return nil, grpcError(err)
	}
	return &masterpb.ReportVolumeFailureResponse{}, nil
}

// HTTP forms, for scripts (docs/master.md). Parameters come from the query
// or a form body.

// lockJSON is the answer of POST /admin/lock.
type lockJSON struct {
	Owner         string    `json:"owner"`
	Token         uint64    `json:"token"`
	ExpiresUnixMs int64     `json:"expiresUnixMs"`
	ExpiresAt     time.Time `json:"expiresAt"`
}

// settingsJSON is the answer of POST /cluster/configure.
type settingsJSON struct {
	DefaultReplication    string            `json:"defaultReplication"`
	CollectionReplication map[string]string `json:"collectionReplication,omitempty"`
	// EcScheme: erasure-coding scheme by collection ("" = the default).
	EcScheme map[string]string `json:"ecScheme,omitempty"`
	// WritePolicy by collection ("" = the default): "strict" or "degraded:N".
	WritePolicy map[string]string `json:"writePolicy,omitempty"`
}

func formUint(r *http.Request, name string) (uint64, error) {
	v := r.FormValue(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s %q is not a number", ErrBadRequest, name, v)
	}
	return n, nil
}

func (s *Server) handleLock(w http.ResponseWriter, r *http.Request) {
	token, err := formUint(r, "token")
	if err != nil {
		writeError(w, err)
		return
	}
	leaseMs, err := formUint(r, "leaseMs")
	if err != nil {
		writeError(w, err)
		return
	}
	owner := r.FormValue("owner")
	l, err := s.leaseAdminLock(r.Context(), owner, token, time.Duration(leaseMs)*time.Millisecond)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, lockJSON{Owner: l.Owner, Token: l.Token, ExpiresUnixMs: l.ExpiresAt.UnixMilli(), ExpiresAt: l.ExpiresAt.UTC()})
}

func (s *Server) handleUnlock(w http.ResponseWriter, r *http.Request) {
	token, err := formUint(r, "token")
	if err != nil {
		writeError(w, err)
		return
	}
	if err := s.releaseAdminLock(r.Context(), r.FormValue("owner"), token); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"released": true})
}

func (s *Server) handleConfigure(w http.ResponseWriter, r *http.Request) {
	token, err := formUint(r, "token")
	if err != nil {
		writeError(w, err)
		return
	}
	minCopies, err := formUint(r, "minCopies")
	if err != nil || minCopies > 1<<16 {
		writeError(w, fmt.Errorf("%w: minCopies %q", ErrBadRequest, r.FormValue("minCopies")))
		return
	}
	set, err := s.configure(r.Context(), token, r.FormValue("collection"), r.FormValue("replication"), r.FormValue("ec"), r.FormValue("writePolicy"), int(minCopies))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, settingsJSON{DefaultReplication: set.DefaultReplication, CollectionReplication: set.CollectionReplication, EcScheme: set.EcScheme, WritePolicy: set.WritePolicy})
}

// topologyStatus is the body of GET /cluster/topology: the tree, the
// volumes out of assigns, and the settings.
func (s *Server) handleTopology(w http.ResponseWriter, r *http.Request) {
	set := s.currentSettings()
	writeJSON(w, http.StatusOK, struct {
		Topology topology.Status `json:"topology"`
		settingsJSON
	}{s.topo.Status(), settingsJSON{set.DefaultReplication, set.CollectionReplication, set.EcScheme, set.WritePolicy}})
}
