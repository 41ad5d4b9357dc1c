package filerserver

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
	"time"

	"google.golang.org/grpc"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/filer"
	"github.com/kelpfs/kelp/internal/filer/store"
	"github.com/kelpfs/kelp/internal/filer/store/pebble"
	"github.com/kelpfs/kelp/internal/filer/store/postgres"
	"github.com/kelpfs/kelp/internal/filer/store/redis"
	"github.com/kelpfs/kelp/internal/httpserve"
	"github.com/kelpfs/kelp/internal/metrics"
	"github.com/kelpfs/kelp/internal/pb"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// Store kinds for Config.Store.
const (
	StoreEmbedded = "embedded"
	StorePostgres = "postgres"
	StoreRedis    = "redis"
)

// Config describes one filer server.
type Config struct {
	IP       string // address others reach this filer at: a host name or IP
	BindIP   string // address the listeners bind; "" means IP
	Port     int    // HTTP port; 0 picks a free one
	GRPCPort int    // 0 means Port+10000
	Masters  []string
	// Store is "embedded" (default: Pebble in Dir), "postgres" or "redis"
	// (StoreDSN: a libpq URL / redis:// URL). Filers sharing a PostgreSQL
	// table or Redis namespace share one namespace.
	Store    string
	StoreDSN string
	Dir      string // directory of the embedded store
	// ChunkSize is the size files are cut into; 0 means 8 MiB.
	ChunkSize   int
	Collection  string // collection and replication of the chunks written
	Replication string
	// EventRetention is how long metadata events are kept (0: forever).
	EventRetention time.Duration
	// GCDelay is how long replaced chunks stay readable (filer.Config;
	// 0 means one minute, negative none).
	GCDelay time.Duration
	// EncryptData seals every chunk under a key of its own (filer.Config);
	// GetConfiguration tells the gateways that store chunks themselves.
	EncryptData bool
	// MetaStore, when set, is used instead of opening Store (tests, or a
	// process that shares one store); the server does not close it.
	MetaStore store.Store
	// Blobs, when set, replaces the cluster client as the blob layer (tests).
	Blobs chunk.Blobs
	// HTTPClient carries requests to masters and volume servers; nil means
	// client.NewHTTPClient(). `kelp server` passes one whose transport serves
	// its own volume server in process (client.Loopback).
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Signer is the JWT signing key (signed file ids): the filer signs the
	// deletes of its garbage collection with it, and shows its server token
	// to the masters. ReadSigner signs its chunk reads.
	Signer     *auth.Signer
	ReadSigner *auth.Signer
	// AccessToken is what the filer shows the masters when it holds no
	// Signer ("" none).
	AccessToken string
	// Access, when set, makes the HTTP and gRPC APIs need an access token
	// (read-only for reads, read-write for the rest); Audit logs writes.
	Access *auth.Access
	Audit  *auth.Audit
	// Metrics is the registry the filer reports to (request metrics, store
	// latencies, event log); nil gives it a registry of its own (Metrics).
	Metrics *metrics.Registry
}

// Server is a running filer.
type Server struct {
	cfg       Config
	log       *slog.Logger
	st        store.Store
	ownsStore bool
	client    *client.Client
	filer     *filer.Filer
	plocks    *posixLocks // advisory locks of the mounts (locks.go)
	dlocks    *davLocks   // WebDAV locks (locks.go)
	statfs    statfsCache
	metrics   *metrics.Registry
	subs      subscribers // metadata subscriptions, for the metrics

	httpLn  net.Listener
	grpcLn  net.Listener
	httpSrv *httpserve.Server
	grpcSrv *grpc.Server

	closeOnce sync.Once
	closeErr  error
}

// New opens the metadata store, connects the blob layer and binds the
// listeners; Run serves.
func New(cfg Config) (*Server, error) {
	if cfg.IP == "" {
		cfg.IP = "127.0.0.1"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("service", "filer"), plocks: newPosixLocks(), dlocks: newDavLocks()}
	var blobs chunk.Blobs = cfg.Blobs
	if len(cfg.Masters) > 0 {
		// Chunks take their file ids from blocks of keys: one assign round
		// trip per 64 chunks instead of one per chunk (small S3 PUTs, small
		// files), with a fresh cookie per chunk.
		tok := auth.Static(cfg.AccessToken)
		if cfg.Signer.Enabled() {
			tok = cfg.Signer.ServerToken
		}
		c, err := client.New(client.Config{Masters: cfg.Masters, HTTPClient: cfg.HTTPClient, Logger: s.log, AssignBatch: 64,
			AccessToken: tok, Signer: cfg.Signer, ReadSigner: cfg.ReadSigner})
		if err != nil {
			return nil, fmt.Errorf("filerserver: %w", err)
		}
		s.client = c
		if blobs == nil {
			blobs = &clusterBlobs{c: c, req: client.AssignRequest{Collection: cfg.Collection, Replication: cfg.Replication}}
		}
	}
	if blobs == nil {
		return nil, errors.New("filerserver: no master address given")
	}
	if err := s.openStore(); err != nil {
		return nil, err
	}
	s.metrics = metrics.OrNew(cfg.Metrics)
	var sm *storeMetrics
	s.metrics.RegisterOnce("filer.store", func(r *metrics.Registry) { sm = newStoreMetrics(r) })
	if sm != nil { // one filer per registry is measured; a second keeps its store as is
		s.st = newTimedStore(s.st, cmp.Or(s.cfg.Store, StoreEmbedded), sm)
	}
	f, err := filer.New(filer.Config{Store: s.st, Blobs: blobs, ChunkSize: cfg.ChunkSize, EventRetention: cfg.EventRetention, GCDelay: cfg.GCDelay, EncryptData: cfg.EncryptData, Logger: s.log})
	if err != nil {
		s.closeStore()
		return nil, fmt.Errorf("filerserver: %w", err)
	}
	s.filer = f
	if err := s.listen(); err != nil {
		f.Close()
		s.closeStore()
		return nil, err
	}
	s.metrics.RegisterOnce("filer", func(r *metrics.Registry) { r.MustRegister(newFilerCollector(s)) })
	// Metrics outside authentication: refused requests are counted too.
	s.httpSrv = httpserve.New(s.metrics.HTTP("filer", nil, cfg.Access.HTTP("filer", s.routes(), httpNeed, cfg.Audit)), s.log)
	s.grpcSrv = grpc.NewServer(slices.Concat(pb.ServerOptions(s.log), s.metrics.GRPCOptions("filer"), cfg.Access.GRPC("filer", grpcNeed, cfg.Audit))...)
	filerpb.RegisterFilerServer(s.grpcSrv, &grpcServer{s: s})
	return s, nil
}

func (s *Server) openStore() error {
	if s.cfg.MetaStore != nil {
		s.st = s.cfg.MetaStore
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	switch s.cfg.Store {
	case "", StoreEmbedded:
		if s.cfg.Dir == "" {
			return errors.New("filerserver: the embedded store needs a directory (--dir)")
		}
		s.st, err = pebble.Open(s.cfg.Dir, &pebble.Options{Logger: s.log})
	case StorePostgres:
		s.st, err = postgres.Open(ctx, s.cfg.StoreDSN, nil)
	case StoreRedis:
		s.st, err = redis.Open(ctx, s.cfg.StoreDSN, nil)
	default:
		return fmt.Errorf("filerserver: unknown store %q (want embedded, postgres or redis)", s.cfg.Store)
	}
	if err != nil {
		return fmt.Errorf("filerserver: open %s store: %w", s.cfg.Store, err)
	}
	s.ownsStore = true
	return nil
}

func (s *Server) closeStore() error {
	if s.ownsStore {
		return s.st.Close()
	}
	return nil
}

func (s *Server) listen() error {
	var err error
	if s.httpLn, s.grpcLn, err = pb.Listen(cmp.Or(s.cfg.BindIP, s.cfg.IP), s.cfg.Port, s.cfg.GRPCPort); err != nil {
		return fmt.Errorf("filerserver: %w", err)
	}
	s.cfg.Port, s.cfg.GRPCPort = pb.Port(s.httpLn), pb.Port(s.grpcLn)
	return nil
}

// Addr is the host:port of the HTTP API.
func (s *Server) Addr() string { return net.JoinHostPort(s.cfg.IP, strconv.Itoa(s.cfg.Port)) }

// GRPCAddr is the host:port of the gRPC API.
func (s *Server) GRPCAddr() string { return net.JoinHostPort(s.cfg.IP, strconv.Itoa(s.cfg.GRPCPort)) }

// Filer exposes the namespace to in-process callers and tests.
func (s *Server) Filer() *filer.Filer { return s.filer }

// Run serves HTTP and gRPC until ctx ends or Close is called.
func (s *Server) Run(ctx context.Context) error {
	errc := make(chan error, 2)
	go func() { errc <- s.httpSrv.Serve(s.httpLn) }()
	go func() { errc <- s.grpcSrv.Serve(s.grpcLn) }()
	s.log.Info("filer listening", "http", s.Addr(), "grpc", s.GRPCAddr(), "store", s.cfg.Store, "masters", s.cfg.Masters)
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		if errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) {
			err = nil
		}
	}
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return err
}

// Close stops serving, stops the filer's background work and closes the
// store (unless it was given in Config.MetaStore). Idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.httpSrv.Stop(5 * time.Second)
		s.grpcSrv.Stop()
		s.filer.Close()
		s.closeErr = s.closeStore()
	})
	return s.closeErr
}
