package consensus

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Peer is one member of the raft group.
type Peer struct {
	// ID names the member; the master uses its HTTP address so that the
	// leader's id is directly the address clients are sent to.
	ID string
	// Address is the member's raft TCP address host:port.
	Address string
}

// Config configures a Node.
type Config struct {
	Dir string // metadata directory; created if missing
	// ID is this member's id (see Peer.ID); required.
	ID string
	// BindAddr is the raft TCP listen address; "127.0.0.1:0" picks a port.
	BindAddr string
	// AdvertiseHost is the host (name or IP) the other members dial this one
	// at, with the bound port; "" means the bound address.
	AdvertiseHost string
	// Peers lists every member including this one. Empty, or only this node,
	// means a single-node group that elects itself at once.
	Peers []Peer
	// KeyBlock is how many file keys one raft Apply reserves; default 100,000.
	KeyBlock uint64
	// ApplyTimeout bounds one raft Apply; default 5s.
	ApplyTimeout time.Duration
	// HeartbeatTimeout is how long a follower waits without hearing from the
	// leader before it stands for election; the election timeout is the same
	// and the leader lease half of it. It bounds fail-over time: a dead
	// leader is replaced within about 2-3 timeouts. Default 400ms, which is
	// comfortable on a LAN; raise it for masters across a WAN.
	HeartbeatTimeout time.Duration
	// ServerTLS and ClientTLS, when set, put the Raft transport under TLS:
	// this member serves with ServerTLS and dials the others with ClientTLS.
	ServerTLS, ClientTLS *tls.Config
	// Listener, when set, is the Raft listener, already bound (BindAddr is
	// then only its description): tests bind every member on 127.0.0.1:0
	// before any opens, with no free-port race. Open takes ownership.
	Listener net.Listener
	// Dial, when set, connects to another member instead of TCP (ClientTLS
	// is then the dialer's business): tests put a network they can cut
	// between members here.
	Dial   func(addr string, timeout time.Duration) (net.Conn, error)
	Logger *slog.Logger
}

// Node is one member of the master raft group. It is safe for concurrent use.
type Node struct {
	cfg       Config
	log       *slog.Logger
	raft      *raft.Raft
	fsm       *fsm
	store     *logStore
	transport *raft.NetworkTransport
	stream    *streamLayer

	keys keyAllocator

	roleChanged   broadcast // this node gained or lost leadership
	leaderChanged broadcast // the leader this node knows of changed

	notify   chan bool             // raft's leadership notifications
	observed chan raft.Observation // raft's leader observations
	observer *raft.Observer
	// observedAt is when the last leader observation was handled (unix
	// nanos): a leader just elected counts as fresh although this follower
	// has not logged a contact with it yet.
	observedAt atomic.Int64
	stop       chan struct{}
	done       chan struct{}
}

// broadcast wakes every waiter at once: a channel closed and replaced on
// each event.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

func (b *broadcast) fire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
	}
	b.ch = make(chan struct{})
}

// Open starts the raft member: it reads the log from Config.Dir, bootstraps a
// new group if the directory is empty, and joins the election.
func Open(cfg Config) (*Node, error) {
	if cfg.Listener != nil && cfg.BindAddr == "" {
		cfg.BindAddr = cfg.Listener.Addr().String()
	}
	if cfg.ID == "" || cfg.BindAddr == "" || cfg.Dir == "" {
		return nil, errors.New("consensus: Config needs ID, BindAddr and Dir")
	}
	if cfg.KeyBlock == 0 {
		cfg.KeyBlock = 100_000
	}
	if cfg.ApplyTimeout == 0 {
		cfg.ApplyTimeout = 5 * time.Second
	}
	if cfg.HeartbeatTimeout == 0 {
		cfg.HeartbeatTimeout = 400 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("consensus: %w", err)
	}
	n := &Node{
		cfg:      cfg,
		log:      cfg.Logger.With("component", "raft"),
		fsm:      &fsm{},
		observed: make(chan raft.Observation, 16),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	n.keys.block = cfg.KeyBlock
	if err := n.start(); err != nil {
		n.closeStores()
		return nil, err
	}
	// Non-blocking: a dropped observation only delays a wake-up, and every
	// waiter re-reads Leader() anyway.
	n.observer = raft.NewObserver(n.observed, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(n.observer)
	go n.watchLeadership()
	return n, nil
}

func (n *Node) start() error {
	cfg := n.cfg
	hlog := hclog.New(&hclog.LoggerOptions{
		Name:   "raft",
		Level:  hclog.Warn,
		Output: slogWriter{n.log},
	})
	store, err := openLogStore(filepath.Join(cfg.Dir, "raft.db"))
	if err != nil {
		return fmt.Errorf("consensus: open log: %w", err)
	}
	n.store = store
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, hlog)
	if err != nil {
		return fmt.Errorf("consensus: open snapshots: %w", err)
	}
	if n.transport, n.stream, err = listenTransport(cfg, hlog); err != nil {
		return err
	}

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = hlog
	rc.SnapshotThreshold = 1024
	rc.SnapshotInterval = time.Minute
	peers := n.members()
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.HeartbeatTimeout
	rc.LeaderLeaseTimeout = cfg.HeartbeatTimeout / 2
	if len(peers) == 1 {
		// Nobody to wait for: elect ourselves quickly.
		rc.HeartbeatTimeout = 100 * time.Millisecond
		rc.ElectionTimeout = 100 * time.Millisecond
		rc.LeaderLeaseTimeout = 50 * time.Millisecond
	}
	notify := make(chan bool, 8)
	rc.NotifyCh = notify

	has, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		return fmt.Errorf("consensus: %w", err)
	}
	var conf raft.Configuration
	for _, p := range peers {
		conf.Servers = append(conf.Servers, raft.Server{
			Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Address),
		})
	}
	if !has {
		if err := raft.BootstrapCluster(rc, store, store, snaps, n.transport, conf); err != nil {
			return fmt.Errorf("consensus: bootstrap: %w", err)
		}
	} else if len(peers) == 1 {
		if err := n.rebindSingle(rc, store, snaps, conf); err != nil {
			return err
		}
	}
	n.raft, err = raft.NewRaft(rc, n.fsm, store, store, snaps, n.transport)
	if err != nil {
		return fmt.Errorf("consensus: start raft: %w", err)
	}
	n.notify = notify
	return nil
}

// rebindSingle lets a single-node group restart under a new id or address
// (a master restarted on another port, or a test using port 0): a group whose
// only voter is unreachable could never elect a leader again. Groups of
// several members are left alone; changing them is an operator's decision.
func (n *Node) rebindSingle(rc *raft.Config, store *logStore, snaps raft.SnapshotStore, want raft.Configuration) error {
	probe := *rc
	cur, err := raft.GetConfiguration(&probe, &fsm{}, store, store, snaps, n.transport)
	if err != nil {
		return fmt.Errorf("consensus: read configuration: %w", err)
	}
	if len(cur.Servers) != 1 || cur.Servers[0] == want.Servers[0] {
		return nil
	}
	n.log.Warn("single-node group moved; rewriting its configuration",
		"old", cur.Servers[0].Address, "oldID", cur.Servers[0].ID, "new", want.Servers[0].Address, "newID", want.Servers[0].ID)
	recover := *rc
	if err := raft.RecoverCluster(&recover, &fsm{}, store, store, snaps, n.transport, want); err != nil {
		return fmt.Errorf("consensus: recover single-node group: %w", err)
	}
	return nil
}

// members is Config.Peers with this node added when missing, this node using
// the transport's real address.
func (n *Node) members() []Peer {
	self := Peer{ID: n.cfg.ID, Address: string(n.transport.LocalAddr())}
	out := []Peer{self}
	for _, p := range n.cfg.Peers {
		if p.ID != self.ID {
			out = append(out, p)
		}
	}
	return out
}

// watchLeadership turns raft's notifications into the LeadershipChanged and
// LeaderChanged broadcasts. Losing leadership drops the key block so that a
// deposed leader stops handing out keys; keys are unique either way because
// the block was committed before use.
func (n *Node) watchLeadership() {
	defer close(n.done)
	for {
		select {
		case <-n.stop:
			return
		case <-n.observed:
			n.observedAt.Store(time.Now().UnixNano())
			n.leaderChanged.fire()
		case leader := <-n.notify:
			if leader {
				// Make sure the state machine has applied every entry of
				// earlier terms before anyone reads State.
				if err := n.raft.Barrier(n.cfg.ApplyTimeout).Error(); err != nil {
					n.log.Warn("barrier after election", "err", err)
				}
			} else {
				n.keys.reset()
			}
			n.log.Info("leadership changed", "leader", leader)
			n.roleChanged.fire()
			n.leaderChanged.fire()
		}
	}
}

// LeadershipChanged returns a channel closed at the next change of this
// node's leadership; call IsLeader after it fires.
func (n *Node) LeadershipChanged() <-chan struct{} { return n.roleChanged.wait() }

// LeaderChanged returns a channel closed when the leader this node knows of
// may have changed (an election, a lost leader, this node's own change);
// call Leader after it fires.
func (n *Node) LeaderChanged() <-chan struct{} { return n.leaderChanged.wait() }

// IsLeader reports whether this node is the raft leader now.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the leader's id and raft address; empty when unknown.
//
// A follower that has not heard from its leader for half a heartbeat timeout
// (five missed heartbeats) reports no leader, although raft itself keeps
// the old one until it stands for election: callers use the answer to send
// clients and volume servers somewhere, and a dead leader is the one place
// they must not be sent.
func (n *Node) Leader() (id, address string) {
	addr, lid := n.raft.LeaderWithID()
	if lid == "" {
		return "", ""
	}
	if string(lid) != n.cfg.ID && len(n.cfg.Peers) > 0 {
		last := n.raft.LastContact()
		if obs := time.Unix(0, n.observedAt.Load()); obs.After(last) {
			last = obs
		}
		if time.Since(last) > n.cfg.HeartbeatTimeout/2 {
			return "", ""
		}
	}
	return string(lid), string(addr)
}

// Stats is a member's raft progress, for status pages and tests.
type Stats struct {
	Role         string    `json:"role"`
	Term         uint64    `json:"term"`
	LastIndex    uint64    `json:"lastIndex"`
	CommitIndex  uint64    `json:"commitIndex"`
	AppliedIndex uint64    `json:"appliedIndex"`
	LastContact  time.Time `json:"lastContact,omitzero"` // followers: last message from the leader
}

// Stats returns this member's raft progress.
func (n *Node) Stats() Stats {
	return Stats{
		Role: stateRole(n.raft.State()), Term: n.raft.CurrentTerm(), LastIndex: n.raft.LastIndex(),
		CommitIndex: n.raft.CommitIndex(), AppliedIndex: n.raft.AppliedIndex(), LastContact: n.raft.LastContact(),
	}
}

// WaitLeader blocks until the group has a leader (possibly another node) and,
// if this node is the leader, its state machine is up to date.
func (n *Node) WaitLeader(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if id, _ := n.Leader(); id != "" {
			if !n.IsLeader() {
				return nil
			}
			return n.raft.Barrier(n.cfg.ApplyTimeout).Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("consensus: waiting for a leader: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// PeerStatus describes a member for status pages.
type PeerStatus struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	Role    string `json:"role"` // leader, follower, candidate, unknown
}

// Peers lists the group's members and the role this node knows of.
func (n *Node) Peers() []PeerStatus {
	lid, _ := n.Leader()
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil
	}
	var out []PeerStatus
	for _, s := range f.Configuration().Servers {
		role := "follower"
		switch {
		case string(s.ID) == lid:
			role = "leader"
		case string(s.ID) == n.cfg.ID:
			role = stateRole(n.raft.State())
		case lid == "":
			role = "unknown"
		}
		out = append(out, PeerStatus{ID: string(s.ID), Address: string(s.Address), Role: role})
	}
	return out
}

func stateRole(s raft.RaftState) string {
	switch s {
	case raft.Leader:
		return "leader"
	case raft.Candidate:
		return "candidate"
	case raft.Follower:
		return "follower"
	}
	return "unknown"
}

// State returns a copy of the replicated state as this node has applied it.
func (n *Node) State() State { return n.fsm.current() }

// SettingsGeneration changes whenever applied Settings may have changed; it
// is one atomic load, for callers that cache Settings on a hot path. Read it
// before State so that a change in between is seen next time.
func (n *Node) SettingsGeneration() uint64 { return n.fsm.settingsGen.Load() }

// apply commits one command and returns the state machine's answer.
func (n *Node) apply(ctx context.Context, t commandType, body any) (applyResult, error) {
	if !n.IsLeader() {
		return applyResult{}, ErrNotLeader
	}
	data, err := encodeCommand(t, body)
	if err != nil {
		return applyResult{}, err
	}
	timeout := n.cfg.ApplyTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d))
	}
	f := n.raft.Apply(data, timeout)
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
			return applyResult{}, fmt.Errorf("%w: %v", ErrNotLeader, err)
		}
		return applyResult{}, fmt.Errorf("consensus: apply: %w", err)
	}
	res, _ := f.Response().(applyResult)
	return res, res.err
}

// Close leaves the group and closes the log. It does not remove this node
// from the group's configuration.
func (n *Node) Close() error {
	close(n.stop)
	<-n.done
	n.raft.DeregisterObserver(n.observer)
	err := n.raft.Shutdown().Error()
	return errors.Join(err, n.closeStores())
}

func (n *Node) closeStores() error {
	var errs []error
	if n.transport != nil {
		errs = append(errs, n.transport.Close())
		n.stream.drain()
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	return errors.Join(errs...)
}

// slogWriter feeds hclog's text lines into slog.
type slogWriter struct{ log *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.log.Warn(string(bytes.TrimSpace(p)))
	return len(p), nil
}
