package master

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/consensus"
	"github.com/kelpfs/kelp/internal/httpfast"
	"github.com/kelpfs/kelp/internal/httpserve"
	"github.com/kelpfs/kelp/internal/metrics"
	"github.com/kelpfs/kelp/internal/pb"
	"github.com/kelpfs/kelp/internal/pb/masterpb"
	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/security"
	"github.com/kelpfs/kelp/internal/topology"
)

// Config configures a master.
type Config struct {
	IP       string // address advertised to peers and clients (a host name or IP); default 127.0.0.1
	BindIP   string // address the listeners (and raft) bind; "" means IP
	Port     int    // HTTP port; 0 picks a free port (single-node only)
	GRPCPort int    // 0 => Port+10000 (a free port when Port is 0)
	// RaftAddr is the raft TCP address; "" => IP:Port+20000 (see pb.DerivedPort; a free port when Port is 0).
	RaftAddr string
	MetaDir  string
	// Peers are the HTTP host:port of every master, this one included,
	// spelled as IP:Port of each; every master gets the same list. Empty means
	// a single master.
	Peers []string
	// RaftHeartbeatTimeout bounds how long followers wait for a silent
	// leader before electing another; 0 means 400ms (see consensus.Config).
	RaftHeartbeatTimeout time.Duration
	// RaftDial, when set, is how this master's Raft dials the others (tests
	// put a network they can cut here, internal/testutil/netcut); nil: TCP.
	RaftDial func(addr string, timeout time.Duration) (net.Conn, error)
	// VolumeDial, when set, is how this master connects to volume servers
	// (their admin API, catch-up requests): tests cut a volume server off
	// from the masters alone with it; nil: TCP.
	VolumeDial func(ctx context.Context, network, addr string) (net.Conn, error)

	VolumeSizeLimit    int64  // bytes; default 30 GiB
	DefaultReplication string // default "000"
	// PulseInterval is the heartbeat interval told to volume servers; a node
	// silent for 3 pulses is dropped. Default 5s.
	PulseInterval time.Duration
	// FailureCooldown is how long a volume stays out of assigns after a
	// volume server reported a failed replicated write; 0 means 10s.
	FailureCooldown time.Duration
	// ReplaceAfter is how long a copy of a degraded-policy volume may be
	// missing (its server gone, not merely behind) before the leader places
	// a replacement copy on another server; 0 means 5 minutes, negative
	// never (heal.go).
	ReplaceAfter time.Duration
	// AdminLockLease is the admin lock's lease when a request names none;
	// 0 means 30s.
	AdminLockLease time.Duration
	// EcRebuildAfter: the leader rebuilds an EC volume's missing shards by
	// itself once they have been missing this long (ecrepair.go); 0 means
	// manual only (ec.rebuild).
	EcRebuildAfter time.Duration
	// RunShell runs an admin shell script against the master at addr
	// ("host:httpPort.grpcPort") as owner, output to out: the automatic
	// EC rebuild's way to reuse the shell's ec.rebuild (wired by the CLI;
	// the master cannot import the shell, whose tests start masters).
	RunShell func(ctx context.Context, addr, owner string, out io.Writer, script string) error
	// Signer signs the file ids assign hands out (the "auth" of the answer);
	// nil: signed file ids are off. Access, when set, makes the mutating
	// APIs need an access token (auth.go); Audit logs them.
	Signer *auth.Signer
	// ReadSigner, the read key, signs read tokens for authenticated
	// clients that do not hold it (GET /dir/readtoken: FUSE, WebDAV).
	ReadSigner *auth.Signer
	Access     *auth.Access
	Audit      *auth.Audit
	// AccessToken is this master's own access token (a read-write one the
	// other masters' Access takes), shown to the leader for requests this
	// master makes itself (the admin UI's volume growth on a follower)
	// when it holds no signing key, whose server token it shows instead.
	// "" none: under access tokens alone such requests are refused unless
	// mutual TLS identifies the master.
	AccessToken string
	Logger      *slog.Logger
	// Metrics is the registry the master reports to (request metrics, raft
	// and topology gauges); nil gives it a registry of its own (Metrics).
	Metrics *metrics.Registry
	// AdminUI, when set, builds the admin web UI mounted at / (paths no API
	// route claims); the CLI passes internal/adminui, which imports this
	// package.
	AdminUI func(*Server) http.Handler
	// GenerateAdminCredential, when set, makes a leader that finds the
	// cluster without an admin UI credential create one (adminCredential):
	// it is called once, on that master only, with the password and the
	// file that keeps it.
	GenerateAdminCredential func(user, password, file string)
	// NoFastAssign turns off the fast assign path (fastassign.go), which
	// is also off under TLS and with Access or Audit set.
	NoFastAssign bool
}

// Server is a master. Create with New, start with Run, stop with Close (or by
// cancelling Run's context).
type Server struct {
	cfg  Config
	log  *slog.Logger
	topo *topology.Topology
	cons *consensus.Node

	metrics *metrics.Registry

	httpLn   net.Listener
	grpcLn   net.Listener
	httpSrv  *httpserve.Server
	fast     *assignListener // nil: the fast assign path is off
	grpcSrv  *grpc.Server
	httpAddr string

	settings    atomic.Pointer[consensus.Settings] // last committed settings
	settingsMu  sync.Mutex                         // serialises refreshSettings
	settingsGen atomic.Uint64                      // consensus.SettingsGeneration of settings
	leaderSince atomic.Int64                       // unix nanos this master last became leader
	maxVID      atomic.Uint32                      // highest volume id known committed

	growMu        sync.Mutex
	growLocks     map[string]*sync.Mutex // per layout and data center (growName)
	growthBackoff growthBackoff          // pauses growth after failures (growth.go)
	abandoned     abandonedCopies        // rolled-back copies whose delete failed
	ecRepair      ecRepair               // automatic EC rebuild (ecrepair.go)
	heal          *healer                // catch-ups of under-replicated copies (heal.go)
	deficits      deficitSync            // the deficit table in raft (deficits.go)

	volumeClients volumeClients
	masterClients masterClients // gRPC connections to the other masters
	prober        prober        // reachability of the volume servers (reach.go)
	streams       streamRegistry
	proxy         *httputil.ReverseProxy // followers forward HTTP requests to the leader
	peerHTTP      *http.Client           // status probes of the other masters
	leaderHTTP    *http.Client           // this master's own requests to the leader

	ctx       context.Context // cancelled by Close; parent of background work
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// New opens the metadata, starts the raft member and binds the listeners;
// nothing is served until Run.
func New(cfg Config) (*Server, error) {
	if cfg.IP == "" {
		cfg.IP = "127.0.0.1"
	}
	if cfg.MetaDir == "" {
		return nil, errors.New("master: Config.MetaDir is required")
	}
	if cfg.VolumeSizeLimit == 0 {
		cfg.VolumeSizeLimit = 30 << 30
	}
	if cfg.DefaultReplication == "" {
		cfg.DefaultReplication = "000"
	}
	if _, err := replication.Parse(cfg.DefaultReplication); err != nil {
		return nil, fmt.Errorf("master: default replication: %w", err)
	}
	if cfg.PulseInterval == 0 {
		cfg.PulseInterval = 5 * time.Second
	}
	if cfg.AdminLockLease == 0 {
		cfg.AdminLockLease = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{
		cfg: cfg,
		log: cfg.Logger.With("service", "master"),
		topo: topology.New(topology.Options{
			VolumeSizeLimit: uint64(cfg.VolumeSizeLimit), FailureCooldown: cfg.FailureCooldown,
			// A healthy server is heard from every pulse.
			StaleAfter: 2 * cfg.PulseInterval,
		}),
		growLocks: map[string]*sync.Mutex{},
	}
	s.proxy, s.peerHTTP, s.leaderHTTP = newLeaderProxy(s)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.heal = newHealer(cfg.VolumeDial)
	if dial := cfg.VolumeDial; dial != nil {
		s.volumeClients.Options = append(s.volumeClients.Options, pb.WithDialer(dial))
	}
	if cfg.Signer.Enabled() {
		// The volume servers' admin API wants a server token (or mTLS).
		s.volumeClients.Options = append(s.volumeClients.Options, auth.DialOption(cfg.Signer.ServerToken))
	}
	s.settings.Store(&consensus.Settings{})
	if err := s.listen(); err != nil {
		s.closeListeners()
		return nil, err
	}
	peers, err := s.raftPeers()
	if err != nil {
		s.closeListeners()
		return nil, err
	}
	raftAddr, raftHost := cfg.RaftAddr, ""
	if raftAddr == "" {
		// Port+20000 (or -20000 above 45535), also for a single master: a
		// port picked by the kernel may be one another server of the same
		// process derives for itself a moment later.
		raftPort := pb.DerivedPort(cfg.Port, pb.RaftPortOffset)
		raftAddr, raftHost = net.JoinHostPort(cmp.Or(cfg.BindIP, cfg.IP), strconv.Itoa(raftPort)), cfg.IP
	}
	s.cons, err = consensus.Open(consensus.Config{
		Dir: filepath.Join(cfg.MetaDir, "raft"), ID: s.httpAddr, BindAddr: raftAddr, AdvertiseHost: raftHost, Peers: peers,
		HeartbeatTimeout: cfg.RaftHeartbeatTimeout, Dial: cfg.RaftDial, Logger: cfg.Logger,
		ServerTLS: security.Process().ServerConfig(security.Peer), ClientTLS: security.Process().ClientConfig(),
	})
	if err != nil {
		s.closeListeners()
		return nil, fmt.Errorf("master: %w", err)
	}
	if len(peers) == 0 {
		// A single master elects itself in a moment; wait so that the first
		// assign after New does not fail with "not the leader".
		wctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
		err := s.cons.WaitLeader(wctx)
		cancel()
		if err != nil {
			s.cons.Close()
			s.closeListeners()
			return nil, fmt.Errorf("master: %w", err)
		}
		if err := s.syncSettings(s.ctx); err != nil {
			s.cons.Close()
			s.closeListeners()
			return nil, fmt.Errorf("master: commit settings: %w", err)
		}
		s.refreshSettings()
	}
	if cfg.Signer.Enabled() {
		// Catch-up requests to volume servers carry the server token.
		s.heal.http.Transport = &auth.Transport{Token: cfg.Signer.ServerToken, Next: s.heal.http.Transport}
	}
	s.metrics = metrics.OrNew(cfg.Metrics)
	s.metrics.RegisterOnce("master", func(r *metrics.Registry) { r.MustRegister(newMasterCollector(s)) })
	// Metrics outside authentication: refused requests are counted too.
	h := s.metrics.HTTP("master", httpOp, cfg.Access.HTTP("master", s.routes(), httpNeed, cfg.Audit))
	if s.fastAssignOn() {
		s.fast = newAssignListener(s.httpLn, s) // see fastassign.go
		s.httpLn = s.fast
		// An assign net/http answered on a connection the fast path handed
		// over (after a lookup, say) takes it back.
		h = httpfast.Reclaim(h, func(r *http.Request) bool { return r.URL.Path == "/dir/assign" && s.cons.IsLeader() }, s.fast.serve)
	}
	s.httpSrv = httpserve.New(h, s.log)
	if s.fast != nil {
		httpfast.RememberConns(s.httpSrv.Server) // for Reclaim
	}
	s.grpcSrv = grpc.NewServer(slices.Concat(pb.ServerOptions(s.log), s.metrics.GRPCOptions("master"), cfg.Access.GRPC("master", s.grpcNeed, cfg.Audit))...)
	masterpb.RegisterMasterServer(s.grpcSrv, &grpcService{s: s})
	return s, nil
}

func (s *Server) listen() error {
	var err error
	if s.httpLn, s.grpcLn, err = pb.Listen(cmp.Or(s.cfg.BindIP, s.cfg.IP), s.cfg.Port, s.cfg.GRPCPort); err != nil {
		return fmt.Errorf("master: %w", err)
	}
	s.httpAddr = net.JoinHostPort(s.cfg.IP, strconv.Itoa(pb.Port(s.httpLn)))
	return nil
}

// raftPeers derives the raft members from Config.Peers (HTTP addresses).
func (s *Server) raftPeers() ([]consensus.Peer, error) {
	if len(s.cfg.Peers) > 0 && !slices.Contains(s.cfg.Peers, s.httpAddr) {
		// Spelled differently, this master would count itself twice and the
		// group could never reach a majority.
		return nil, fmt.Errorf("master: peers %v do not include this master as %s; list every master as ip:port, the same on each", s.cfg.Peers, s.httpAddr)
	}
	var out []consensus.Peer
	for _, p := range s.cfg.Peers {
		host, port, err := net.SplitHostPort(p)
		n, perr := strconv.Atoi(port)
		if err != nil || perr != nil {
			return nil, fmt.Errorf("master: peer %q: want host:port", p)
		}
		if p == s.httpAddr {
			continue
		}
		if s.cfg.Port == 0 {
			return nil, errors.New("master: Port 0 is only for a single master (peers need fixed ports)")
		}
		out = append(out, consensus.Peer{ID: p, Address: net.JoinHostPort(host, strconv.Itoa(pb.DerivedPort(n, pb.RaftPortOffset)))})
	}
	return out, nil
}

// HTTPAddr is the HTTP host:port, with the real port when Config.Port was 0.
func (s *Server) HTTPAddr() string { return s.httpAddr }

// GRPCAddr is the gRPC host:port.
func (s *Server) GRPCAddr() string {
	return net.JoinHostPort(s.cfg.IP, strconv.Itoa(pb.Port(s.grpcLn)))
}

// Run serves until ctx is cancelled or a listener fails, then closes the
// server.
func (s *Server) Run(ctx context.Context) error {
	errc := make(chan error, 2)
	go func() { errc <- s.httpSrv.Serve(s.httpLn) }()
	go func() { errc <- s.grpcSrv.Serve(s.grpcLn) }()
	s.wg.Add(6)
	go s.ecRepairLoop()
	go s.healLoop()
	go s.probeLoop()
	go s.expireLoop()
	go s.leadershipLoop()
	go s.mirrorLoop()
	s.log.Info("master started", "http", s.httpAddr, "grpc", s.GRPCAddr())
	var err error
	select {
	case <-ctx.Done():
	case <-s.ctx.Done():
	case err = <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
	}
	return errors.Join(err, s.Close())
}

// Close stops serving, background work and raft. It is safe to call twice.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		err := s.httpSrv.Stop(2 * time.Second)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		if s.fast != nil {
			// Stop closed it; the assigns it serves finish first.
			s.fast.wait()
		}
		// Stop, not GracefulStop: heartbeat streams never end on their own.
		s.grpcSrv.Stop()
		s.closeListeners()
		s.wg.Wait()
		s.closeErr = errors.Join(err, s.volumeClients.Close(), s.masterClients.Close(), s.cons.Close())
	})
	return s.closeErr
}

// Crash stops the master as a killed process stops, for fail-over tests:
// raft first, so that leadership ends at once with nothing said to the
// peers, then every listener and connection is cut, no request finished.
// Close afterwards does nothing more.
func (s *Server) Crash() {
	s.closeOnce.Do(func() {
		s.cancel()
		s.closeErr = s.cons.Close()
		s.httpSrv.Server.Close()
		s.grpcSrv.Stop()
		s.closeListeners()
		s.wg.Wait()
		s.volumeClients.Close()
		s.masterClients.Close()
	})
}

func (s *Server) closeListeners() {
	for _, ln := range []net.Listener{s.httpLn, s.grpcLn} {
		if ln != nil {
			ln.Close()
		}
	}
}

// deadTimeout is how long a silent node stays in the topology.
func (s *Server) deadTimeout() time.Duration { return 3 * s.cfg.PulseInterval }

func (s *Server) expireLoop() {
	defer s.wg.Done()
	t := time.NewTicker(max(s.cfg.PulseInterval/2, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-t.C:
			for _, url := range s.topo.ExpireNodes(now, s.deadTimeout()) {
				s.log.Warn("volume server missed its heartbeats; dropped", "node", url, "timeout", s.deadTimeout())
			}
		}
	}
}

// leadershipLoop commits Config's settings whenever this master becomes
// leader and keeps the cached settings current.
func (s *Server) leadershipLoop() {
	defer s.wg.Done()
	for {
		changed := s.cons.LeadershipChanged()
		if s.cons.IsLeader() {
			s.leaderSince.Store(time.Now().UnixNano())
			if err := s.syncSettings(s.ctx); err != nil && s.ctx.Err() == nil {
				s.log.Error("commit settings", "err", err)
			}
			if err := s.ensureAdminCredential(s.ctx); err != nil && s.ctx.Err() == nil {
				s.log.Error("admin UI credential", "err", err)
			}
			s.refreshSettings()
			// Before the first heal tick: until then this master's own
			// view may take a copy that missed writes for good.
			s.commitDeficits()
		}
		s.refreshSettings()
		select {
		case <-s.ctx.Done():
			return
		case <-changed:
		}
	}
}

// syncSettings commits Config's settings: the volume size limit whenever it
// differs (it is a deployment choice, and the command line wins), the default
// replication only when the cluster has none yet. The latter is changed at
// run time with Configure, and a master restarted or elected later must not
// undo that with its flag.
func (s *Server) syncSettings(ctx context.Context) error {
	if err := s.cons.WaitLeader(ctx); err != nil {
		return err
	}
	st := s.cons.State().Settings
	var u consensus.SettingsUpdate
	if limit := uint64(s.cfg.VolumeSizeLimit); st.VolumeSizeLimit != limit {
		u.VolumeSizeLimit = &limit
	}
	if st.DefaultReplication == "" {
		u.DefaultReplication = &s.cfg.DefaultReplication
	}
	if u.VolumeSizeLimit == nil && u.DefaultReplication == nil {
		return nil
	}
	return s.cons.UpdateSettings(ctx, u)
}

func (s *Server) refreshSettings() {
	// One refresh at a time: two interleaved ones could leave an older
	// snapshot stored under the newer generation, and the stale settings
	// would then stick until the next change.
	s.settingsMu.Lock()
	defer s.settingsMu.Unlock()
	gen := s.cons.SettingsGeneration()
	st := s.cons.State()
	set := st.Settings
	if set.VolumeSizeLimit == 0 {
		set.VolumeSizeLimit = uint64(s.cfg.VolumeSizeLimit)
	}
	if set.DefaultReplication == "" {
		set.DefaultReplication = s.cfg.DefaultReplication
	}
	s.settings.Store(&set)
	s.settingsGen.Store(gen)
	s.topo.SetVolumeSizeLimit(set.VolumeSizeLimit)
	s.topo.SetWritePolicies(set.WritePolicy)
	if st.MaxVolumeID > s.maxVID.Load() {
		s.maxVID.Store(st.MaxVolumeID)
	}
}

// currentSettings returns the cached settings, refreshed first if raft has
// applied a change since: one atomic load on the hot path.
func (s *Server) currentSettings() *consensus.Settings {
	if s.cons.SettingsGeneration() != s.settingsGen.Load() {
		s.refreshSettings()
	}
	return s.settings.Load()
}

// leader returns the leader's HTTP address, "" when unknown.
func (s *Server) leader() string {
	id, _ := s.cons.Leader()
	return id
}

// IsLeader reports whether this master leads the raft group now.
func (s *Server) IsLeader() bool { return s.cons.IsLeader() }

// Leader returns the leading master's HTTP address, "" while none is known.
func (s *Server) Leader() string { return s.leader() }

// RaftStats returns this master's raft progress (role, term, indexes).
func (s *Server) RaftStats() consensus.Stats { return s.cons.Stats() }

// Settings returns the replicated cluster settings as this master has
// applied them.
func (s *Server) Settings() consensus.Settings { return s.cons.State().Settings }
