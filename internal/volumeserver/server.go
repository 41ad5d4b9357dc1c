package volumeserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/httpfast"
	"github.com/kelpfs/kelp/internal/httpserve"
	"github.com/kelpfs/kelp/internal/localread"
	"github.com/kelpfs/kelp/internal/metrics"
	"github.com/kelpfs/kelp/internal/pb"
	"github.com/kelpfs/kelp/internal/pb/volumepb"
	"github.com/kelpfs/kelp/internal/store"
	"github.com/kelpfs/kelp/internal/vfs"
)

// Config describes one volume server.
type Config struct {
	IP         string // address reported to the master and peers: a host name or IP
	BindIP     string // address the listeners bind; "" means IP
	Port       int    // HTTP data port
	GRPCPort   int    // admin port; 0 means Port+10000
	PublicURL  string // host:port clients should use; empty means IP:Port
	Masters    []string
	DataCenter string
	Rack       string
	Disks      []store.DiskConfig
	Fsync      bool
	// MaxUploadSize bounds one file; larger uploads get 413. 0 means 4 GiB - 1,
	// the largest needle the volume format can hold.
	MaxUploadSize int64
	// VolumeSizeLimit applies until the master sends its own; 0 means 30 GiB.
	VolumeSizeLimit int64
	// PulseInterval is how often the full state is sent to the master even
	// when nothing changed; the master drops a server it has not heard from
	// for a few of its own pulses, so keep the two equal. 0 means 5 s.
	PulseInterval time.Duration
	FS            vfs.FS // nil means the real file system
	// Signer, when set, makes writes and deletes need a file token signed
	// with the JWT signing key (auth.go); ReadSigner does the same for reads.
	Signer     *auth.Signer
	ReadSigner *auth.Signer
	// Access guards the admin gRPC API: with it (or Signer) set, a call
	// needs a verified client certificate, the server token, or an access
	// token of Access (grpcNeed in auth.go). Nil with no Signer: open.
	Access *auth.Access
	Audit  *auth.Audit // refused writes and admin calls; nil: none
	// NoFastRead turns off the fast read path (fastread.go), which is also
	// off by itself when reads need a token (ReadSigner) or TLS is on.
	NoFastRead bool
	// NoFastWrite turns off the fast write path (fastwrite.go), which is
	// also off when the fast read path is, and when writes need a token
	// (Signer).
	NoFastWrite bool
	// NoLocalReads turns off the short-circuit for readers on this host
	// (localread.go): they read over HTTP.
	NoLocalReads bool
	// PeerDial, when set, connects to other volume servers (forwarded
	// writes and deletes, catch-up) instead of a TCP dial with
	// replicaDialTimeout: tests cut the links between volume servers with
	// it (testutil/netcut).
	PeerDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// MasterDial, when set, connects to the masters (heartbeats, lookups)
	// instead of a TCP dial: tests cut a server off from the masters alone
	// with it.
	MasterDial func(ctx context.Context, network, addr string) (net.Conn, error)
	Logger     *slog.Logger
	// Metrics is the registry the server reports to (request metrics, disk
	// and volume gauges); nil gives it a registry of its own (Metrics).
	Metrics *metrics.Registry
}

// Server is a running volume server.
type Server struct {
	cfg   Config
	log   *slog.Logger
	store *store.Store

	httpLn  net.Listener
	fast    *fastListener     // nil: the fast read path is off
	local   *localread.Server // nil: local reads are off
	grpcLn  net.Listener
	httpSrv *httpserve.Server
	grpcSrv *grpc.Server

	changed chan struct{} // store changes that deserve an immediate heartbeat
	// heartbeatSeq numbers heartbeats; see masterpb.HeartbeatRequest.sequence.
	heartbeatSeq atomic.Uint64

	client *client.Client // locates the other copies of replicated volumes
	http   *http.Client   // forwards replicated writes
	conns  pb.ConnPool    // admin connections to other volume servers
	// ecSuspects: EC shard holders (URL) whose reads failed, skipped until
	// the time stored (ec.go).
	ecSuspects sync.Map
	ecCache    *blockCache // reconstructed EC blocks (eccache.go)
	// ecStale: EC volumes (id -> *sync.Mutex) that may miss deletes made
	// while this server was away (ecjournal.go).
	ecStale sync.Map
	// hbLost: the heartbeat stream broke; the next one marks EC volumes stale.
	hbLost atomic.Bool
	// lastHeartbeat: unix nanos of the master's last answer (or the start).
	lastHeartbeat atomic.Int64
	// crashed: Crash was called; the heartbeat stream is dropped, not
	// closed.
	crashed atomic.Bool
	metrics *metrics.Registry

	mu     sync.Mutex
	master string // master currently holding the heartbeat stream
	// hbCancel ends Run's context, hbDone is closed when its heartbeat
	// loop has returned (for Crash).
	hbCancel  context.CancelFunc
	hbDone    chan struct{}
	closeOnce sync.Once
}

const defaultVolumeSizeLimit = 30 << 30

// replicaDialTimeout bounds connecting to another volume server (forwarded
// writes, catch-up, EC shards).
const replicaDialTimeout = 2 * time.Second

// masterWait bounds how long a lookup (a write's copies, an EC volume's
// shards) retries while no master answers; an election takes 0.5-2 s.
const masterWait = 4 * time.Second

// New opens the disks, loads every volume and binds the listeners; Run serves.
func New(cfg Config) (*Server, error) {
	if cfg.IP == "" {
		cfg.IP = "127.0.0.1"
	}
	if cfg.MaxUploadSize <= 0 {
		cfg.MaxUploadSize = maxNeedleData
	}
	if cfg.VolumeSizeLimit <= 0 {
		cfg.VolumeSizeLimit = defaultVolumeSizeLimit
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.PulseInterval <= 0 {
		cfg.PulseInterval = 5 * time.Second
	}
	if len(cfg.Disks) == 0 {
		return nil, errors.New("volumeserver: no disk directory given")
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("service", "volume"), changed: make(chan struct{}, 1), ecCache: newBlockCache(ecCacheBytes)}
	s.heartbeatSeq.Store(uint64(time.Now().UnixNano()))
	s.lastHeartbeat.Store(time.Now().UnixNano())
	if len(cfg.Masters) > 0 {
		// Copies move rarely, but when they do a stale location fails the write
		// (and the client retries), so the cache is kept short. A write that
		// must look its copies up waits for a master at most masterWait:
		// longer than an election, shorter than the writer's own patience
		// (10 s in our client), so that the writer hears a 503 naming the
		// missing master instead of timing out.
		ccfg := client.Config{Masters: cfg.Masters, LookupTTL: 10 * time.Second, MasterWait: masterWait, Logger: s.log}
		if cfg.MasterDial != nil {
			ccfg.HTTPClient = client.NewHTTPClient()
			ccfg.HTTPClient.Transport.(*http.Transport).DialContext = cfg.MasterDial
		}
		c, err := client.New(ccfg)
		if err != nil {
			return nil, fmt.Errorf("volumeserver: %w", err)
		}
		s.client = c
	}
	s.http = client.NewHTTPClient()
	if tr, ok := s.http.Transport.(*http.Transport); ok {
		// A copy in another data center accepts a connection within a
		// second even over a slow link (one lost SYN included); one behind a
		// partition never does, and a write waits for its forward.
		tr.DialContext = (&net.Dialer{Timeout: replicaDialTimeout, KeepAlive: 30 * time.Second}).DialContext
		if cfg.PeerDial != nil {
			tr.DialContext = cfg.PeerDial
		}
	}
	if cfg.Signer.Enabled() {
		// Every request to a peer (replica writes, catch-up, EC shards)
		// carries the server token.
		s.http.Transport = &auth.Transport{Token: cfg.Signer.ServerToken, Next: s.http.Transport}
		s.conns.Options = []grpc.DialOption{auth.DialOption(cfg.Signer.ServerToken)}
	}
	st, err := store.New(store.Config{
		Disks:           cfg.Disks,
		FS:              cfg.FS,
		VolumeSizeLimit: cfg.VolumeSizeLimit,
		Fsync:           cfg.Fsync,
		OnChange:        s.notifyChange,
		Logger:          s.log,
	})
	if err != nil {
		return nil, fmt.Errorf("volumeserver: %w", err)
	}
	s.store = st
	s.markECStale() // this server may have been down: see ecjournal.go
	if err := s.listen(); err != nil {
		st.Close()
		return nil, err
	}
	if s.cfg.PublicURL == "" {
		s.cfg.PublicURL = s.URL()
	}
	s.metrics = metrics.OrNew(cfg.Metrics)
	s.metrics.RegisterOnce("volume", func(r *metrics.Registry) { r.MustRegister(newVolumeCollector(s)) })
	h := s.metrics.HTTP("volume", httpOp, s.authorize(s.routes()))
	if s.fastReadOn() {
		s.fast = newFastListener(s.httpLn, s) // see fastread.go
		// A plain read net/http answered on a connection the fast path
		// handed over (after a write, say) takes it back.
		s.httpLn, h = s.fast, httpfast.Reclaim(h, func(r *http.Request) bool { return httpOp(r) == "read" }, s.fast.serve)
	}
	s.httpSrv = httpserve.New(h, s.log)
	if s.fast != nil {
		httpfast.RememberConns(s.httpSrv.Server) // for Reclaim
	}
	access, err := s.adminAccess()
	if err != nil {
		st.Close()
		return nil, err
	}
	s.grpcSrv = grpc.NewServer(slices.Concat(pb.ServerOptions(s.log), s.metrics.GRPCOptions("volume"), access.GRPC("volume", grpcNeed, cfg.Audit))...)
	volumepb.RegisterVolumeServerServer(s.grpcSrv, &adminServer{s: s})
	s.startLocalReads()
	return s, nil
}

// fastReadOn reports whether plain reads are answered outside net/http
// (fastread.go). Not with read tokens: checking them is authorize's job.
// The fast path skips the handler chain New builds (metrics are counted by
// it; authorize is a no-op for reads without ReadSigner): a middleware
// added there that acts on plain reads must be mirrored in fastread.go or
// turn it off here.
func (s *Server) fastReadOn() bool {
	return !s.cfg.NoFastRead && !s.cfg.ReadSigner.Enabled()
}

func (s *Server) listen() error {
	var err error
	if s.httpLn, s.grpcLn, err = pb.Listen(cmp.Or(s.cfg.BindIP, s.cfg.IP), s.cfg.Port, s.cfg.GRPCPort); err != nil {
		return fmt.Errorf("volumeserver: %w", err)
	}
	s.cfg.Port, s.cfg.GRPCPort = pb.Port(s.httpLn), pb.Port(s.grpcLn)
	return nil
}

// Handler is the HTTP data path, for serving it in process as well
// (client.Loopback).
func (s *Server) Handler() http.Handler { return s.httpSrv.Handler }

// PublicURL is the host:port clients are told to use.
func (s *Server) PublicURL() string { return s.cfg.PublicURL }

// URL is the host:port of the HTTP data path.
func (s *Server) URL() string { return net.JoinHostPort(s.cfg.IP, strconv.Itoa(s.cfg.Port)) }

// HeartbeatMaster is the master this server heartbeats now (or last did).
func (s *Server) HeartbeatMaster() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.master
}

// GRPCAddr is the host:port of the admin API.
func (s *Server) GRPCAddr() string {
	return net.JoinHostPort(s.cfg.IP, strconv.Itoa(s.cfg.GRPCPort))
}

// Store exposes the local store to in-process tests.
func (s *Server) Store() *store.Store { return s.store }

// Run serves HTTP and gRPC and keeps the heartbeat stream to the master open
// until ctx ends or Close is called.
func (s *Server) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	go func() { errc <- s.httpSrv.Serve(s.httpLn) }()
	go func() { errc <- s.grpcSrv.Serve(s.grpcLn) }()
	hbDone := make(chan struct{})
	s.mu.Lock()
	s.hbCancel, s.hbDone = cancel, hbDone
	s.mu.Unlock()
	go func() { defer close(hbDone); s.heartbeatLoop(ctx) }()
	go s.ecCatchUpLoop(ctx)
	s.log.Info("volume server listening", "http", s.URL(), "grpc", s.GRPCAddr(), "masters", s.cfg.Masters)
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		if errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) {
			err = nil
		}
	}
	cancel()
	<-hbDone
	s.Close()
	return err
}

// Close stops serving and closes every volume; acknowledged writes are already durable.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.httpSrv.Stop(5 * time.Second)
		if s.fast != nil {
			// Stop closed it; uploads it was writing finish first.
			httpfast.WaitAtMost(&s.fast.writing, 5*time.Second)
		}
		s.grpcSrv.Stop()
		s.conns.Close()
		s.stopLocalReads()
		err = s.store.Close()
	})
	return err
}

// Crash stops the server as a killed process stops, for fault tests: every
// connection is cut with no request finished, and the heartbeat stream breaks
// instead of ending cleanly (the master sees what it sees of a kill -9).
// Volumes are closed (acknowledged writes are durable anyway), so that the
// server can start again on the same disks. Close afterwards does nothing
// more; Run returns.
func (s *Server) Crash() {
	s.crashed.Store(true)
	s.closeOnce.Do(func() {
		s.httpSrv.Server.Close()
		s.grpcSrv.Stop()
		s.conns.Close()
		s.stopLocalReads()
		s.mu.Lock()
		cancel, done := s.hbCancel, s.hbDone
		s.mu.Unlock()
		if cancel != nil {
			cancel()
			<-done
		}
		s.store.Close()
	})
}

func (s *Server) notifyChange() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}
