package master

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/kelpfs/kelp/internal/consensus"
	"github.com/kelpfs/kelp/internal/pb"
	"github.com/kelpfs/kelp/internal/security"
	"github.com/kelpfs/kelp/internal/topology"
)

// ClusterStatus is the body of GET /cluster/status and of the gRPC
// ClusterStatus call. Any master answers it: the masters' roles come from
// each master itself, asked at the time of the request.
type ClusterStatus struct {
	Self               string            `json:"self"` // this master's HTTP address
	IsLeader           bool              `json:"isLeader"`
	Leader             string            `json:"leader"`
	Peers              []PeerStatus      `json:"peers"`
	VolumeSizeLimit    uint64            `json:"volumeSizeLimit"`
	DefaultReplication string            `json:"defaultReplication"`
	CollectionRepl     map[string]string `json:"collectionReplication,omitempty"`
	// WritePolicy by collection ("" = the default; absent = strict):
	// "strict" or "degraded:N" with N the copies a write needs.
	WritePolicy   map[string]string     `json:"writePolicy,omitempty"`
	AdminLock     *AdminLockStatus      `json:"adminLock,omitempty"`
	MaxVolumeID   uint32                `json:"maxVolumeId"`
	PulseSeconds  float64               `json:"pulseSeconds"`
	VolumeServers []topology.NodeStatus `json:"volumeServers"`
	// UnwritableVolumes were taken out of assigns by a reported write failure.
	UnwritableVolumes []topology.VolumeFailure `json:"unwritableVolumes,omitempty"`
	// AbandonedCopies are copies left by a failed volume growth whose
	// delete failed; the master retries the delete every pulse.
	AbandonedCopies []AbandonedCopy `json:"abandonedCopies,omitempty"`
	// EcVolumes are the erasure-coded volumes: scheme, shards present and
	// missing (docs/erasure-coding.md).
	EcVolumes []topology.EcVolumeStatus `json:"ecVolumes,omitempty"`
	// EcRepair is the automatic EC rebuild (--ec.rebuild-after), when on.
	EcRepair *EcRepairStatus `json:"ecRepair,omitempty"`
	// UnderReplicated are volumes of degraded collections whose copies lack
	// writes or are missing, with why and the healing progress (heal.go).
	UnderReplicated []topology.VolumeDeficit `json:"underReplicated,omitempty"`
	Healed          HealStats                `json:"healed"`
}

// AdminLockStatus shows who holds the admin lock (never its token).
type AdminLockStatus struct {
	Owner     string    `json:"owner"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// PeerStatus is one master of the raft group.
type PeerStatus struct {
	Address  string `json:"address"` // HTTP host:port
	RaftAddr string `json:"raftAddress"`
	// Role is leader, follower or candidate as the master says itself, or
	// "unreachable" when it did not answer.
	Role         string `json:"role"`
	Term         uint64 `json:"term,omitempty"`
	AppliedIndex uint64 `json:"appliedIndex,omitempty"`
	// LastContact is, on a follower, when it last heard from the leader.
	LastContact time.Time `json:"lastContact,omitzero"`
	Error       string    `json:"error,omitempty"`
}

// RaftStatus is the body of GET /cluster/raft: one master's own view.
type RaftStatus struct {
	Address string `json:"address"`
	Leader  string `json:"leader"`
	consensus.Stats
}

func (s *Server) raftStatus() RaftStatus {
	return RaftStatus{Address: s.httpAddr, Leader: s.leader(), Stats: s.cons.Stats()}
}

func (s *Server) handleRaft(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.raftStatus())
}

// peerProbeTimeout bounds the status probe of one other master.
const peerProbeTimeout = 500 * time.Millisecond

func (s *Server) clusterStatus(ctx context.Context) ClusterStatus {
	st := s.cons.State()
	set := s.currentSettings()
	cs := ClusterStatus{
		Self: s.httpAddr, IsLeader: s.cons.IsLeader(), Leader: s.leader(),
		VolumeSizeLimit: set.VolumeSizeLimit, DefaultReplication: set.DefaultReplication,
		CollectionRepl: set.CollectionReplication,
		MaxVolumeID:    st.MaxVolumeID, PulseSeconds: s.cfg.PulseInterval.Seconds(),
		VolumeServers: s.topo.Nodes(false), UnwritableVolumes: s.topo.Failures(),
		AbandonedCopies: s.abandoned.list(), EcVolumes: s.topo.EcStatus(), EcRepair: s.ecRepairStatus(),
		WritePolicy: set.WritePolicy, UnderReplicated: s.topo.Deficits(), Healed: s.healStats(),
	}
	if st.Lock.Owner != "" && time.Now().Before(st.Lock.ExpiresAt) {
		cs.AdminLock = &AdminLockStatus{Owner: st.Lock.Owner, ExpiresAt: st.Lock.ExpiresAt.UTC()}
	}
	peers := s.cons.Peers()
	cs.Peers = make([]PeerStatus, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		cs.Peers[i] = PeerStatus{Address: p.ID, RaftAddr: p.Address, Role: p.Role}
		if p.ID == s.httpAddr {
			own := s.cons.Stats()
			cs.Peers[i].Role, cs.Peers[i].Term, cs.Peers[i].AppliedIndex = own.Role, own.Term, own.AppliedIndex
			cs.Peers[i].LastContact = own.LastContact
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs, err := s.probePeer(ctx, p.ID)
			if err != nil {
				cs.Peers[i].Role, cs.Peers[i].Error = "unreachable", err.Error()
				return
			}
			cs.Peers[i].Role, cs.Peers[i].Term, cs.Peers[i].AppliedIndex = rs.Role, rs.Term, rs.AppliedIndex
			cs.Peers[i].LastContact = rs.LastContact
		}()
	}
	wg.Wait()
	return cs
}

// probePeer asks another master for its own raft view.
func (s *Server) probePeer(ctx context.Context, addr string) (RaftStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, peerProbeTimeout)
	defer cancel()
	var rs RaftStatus
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, security.URL(addr)+"/cluster/raft", nil)
	if err != nil {
		return rs, err
	}
	resp, err := s.peerHTTP.Do(req)
	if err != nil {
		return rs, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return rs, fmt.Errorf("master: %s answered %s", addr, resp.Status)
	}
	return rs, json.NewDecoder(resp.Body).Decode(&rs)
}

func (s *Server) handleClusterStatus(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.clusterStatus(r.Context()))
}

// ClusterStatus is what GET /cluster/status answers (the admin UI's source).
func (s *Server) ClusterStatus(ctx context.Context) ClusterStatus { return s.clusterStatus(ctx) }

// TopologyStatus is this master's topology tree (a follower's is the copy it
// mirrors from the leader).
func (s *Server) TopologyStatus() topology.Status { return s.topo.Status() }

// EcVolumes lists the erasure-coded volumes with their shards.
func (s *Server) EcVolumes() []topology.EcVolumeStatus { return s.topo.EcStatus() }

// PulseSeconds is the volume servers' heartbeat interval.
func (s *Server) PulseSeconds() float64 { return s.cfg.PulseInterval.Seconds() }

// RunShell runs an admin shell script against this master as owner
// (Config.RunShell), for the admin UI's maintenance actions.
func (s *Server) RunShell(ctx context.Context, owner string, out io.Writer, script string) error {
	if s.cfg.RunShell == nil {
		return fmt.Errorf("master: no shell configured (Config.RunShell)")
	}
	return s.cfg.RunShell(ctx, s.httpAddr+"."+strconv.Itoa(pb.Port(s.grpcLn)), owner, out, script)
}
