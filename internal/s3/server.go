package s3

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/httpserve"
	"github.com/kelpfs/kelp/internal/kms"
	"github.com/kelpfs/kelp/internal/metrics"
	"github.com/kelpfs/kelp/internal/objectapi"
	"github.com/kelpfs/kelp/internal/s3/sigv4"
	"github.com/kelpfs/kelp/internal/security"
)

// Config configures an S3 gateway.
type Config struct {
	IP     string // address clients reach the gateway at (a host name or IP); "" means 127.0.0.1
	BindIP string // address the listener binds; "" means IP
	Port   int    // 0 picks a free port
	// Namespace is the filer the buckets live in (required); BucketRoot
	// the directory holding them ("" means /buckets).
	Namespace  objectapi.Namespace
	BucketRoot string
	// Domains enable virtual-hosted-style requests: a Host of
	// "bucket.<domain>" names the bucket.
	Domains []string
	// Region is what GetBucketLocation reports; "" means us-east-1.
	// Requests signed for any region are accepted.
	Region string
	// Identities are fixed users; ConfigFile, if set, adds those of an
	// identity file (see IdentityFile), re-read when it changes (checked
	// every ReloadInterval, 0 means 2s). The gateway refuses to start with
	// no identity at all: it never serves an open endpoint by accident.
	Identities     []Identity
	ConfigFile     string
	ReloadInterval time.Duration
	// SharedIdentities, when set (to SharedIdentitiesPath), is an identity
	// file in the filer, re-read when it changes (checked every
	// ReloadInterval): the keys the admin UI creates and revokes.
	SharedIdentities string
	// MinPartSize is the smallest non-last multipart part; 0 means 5 MiB.
	MinPartSize int64
	// Concurrency is how many chunks of one upload are written at once; 0
	// means the chunk package's default.
	Concurrency int
	// LifecycleInterval is how often bucket lifecycle rules are applied;
	// 0 means every hour, a negative value never (tests apply them by hand).
	LifecycleInterval time.Duration
	Logger            *slog.Logger
	Now               func() time.Time // nil means time.Now (signature clock skew)

	// KMS is the key service of SSE-S3 and SSE-KMS; nil refuses both
	// (SSE-C needs none). New shares its keys through the filer
	// (kms.FilerStore) and fails when they were made under another
	// master key.
	KMS *kms.Service
	// Audit, when set, logs every mutating request (PUT, POST, DELETE):
	// the identity's name (never a key), bucket/key, the answer's status.
	Audit *auth.Audit
	// Metrics is the registry the gateway reports its requests to (label
	// op: the S3 operation); nil gives it a registry of its own (Metrics).
	Metrics *metrics.Registry
}

// Server is a running S3 gateway.
type Server struct {
	cfg      Config
	log      *slog.Logger
	layer    *objectapi.Layer
	verifier *sigv4.Verifier
	ids      atomic.Pointer[identities]
	sharedAt atomic.Pointer[string] // stamp of the shared file last loaded

	reqPrefix string
	reqSeq    atomic.Uint64
	bufs      sync.Pool // *[]byte copy buffers for GET of encrypted objects
	bigBufs   sync.Pool // *[]byte copy buffers for GET of plain objects
	policies  sync.Map  // bucket -> parsedPolicy, the last policy parsed for it

	bucketKeys bucketKeyCache // SSE-KMS bucket keys (sse.go)

	ln        net.Listener
	srv       *httpserve.Server
	metrics   *metrics.Registry
	closeOnce sync.Once
	closeErr  error
}

// New checks the configuration, loads the identities and binds the
// listener; Run serves.
func New(cfg Config) (*Server, error) {
	if cfg.Namespace == nil {
		return nil, errors.New("s3: Config.Namespace is required")
	}
	if cfg.IP == "" {
		cfg.IP = "127.0.0.1"
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.ReloadInterval <= 0 {
		cfg.ReloadInterval = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("service", "s3")}
	layer, err := objectapi.New(objectapi.Config{
		Namespace: cfg.Namespace, Root: cfg.BucketRoot, Concurrency: cfg.Concurrency,
		MinPartSize: cfg.MinPartSize, Logger: s.log, Now: cfg.Now,
	})
	if err != nil {
		return nil, fmt.Errorf("s3: %w", err)
	}
	s.layer = layer
	if cfg.KMS != nil {
		// The keys live in the filer too, so that every gateway over it
		// reads the objects the others encrypted (with the same master key).
		if err := cfg.KMS.Share(kms.FilerStore(cfg.Namespace)); err != nil {
			return nil, fmt.Errorf("s3: %w", err)
		}
	}
	if err := s.reload(); err != nil {
		return nil, err
	}
	if len(s.ids.Load().byKey) == 0 {
		return nil, errors.New("s3: no identities configured (give access keys or an identity file); refusing to serve an open endpoint")
	}
	s.verifier = &sigv4.Verifier{Creds: credentials{cur: &s.ids}, Now: cfg.Now, VirtualHostBucket: s.virtualBucket}
	var b [6]byte
	rand.Read(b[:])
	s.reqPrefix = hex.EncodeToString(b[:])
	s.bufs.New = func() any { b := make([]byte, copyBufSize); return &b }
	s.bigBufs.New = func() any { b := make([]byte, bigBufSize); return &b }
	s.ln, err = net.Listen("tcp", net.JoinHostPort(cmp.Or(cfg.BindIP, cfg.IP), strconv.Itoa(cfg.Port)))
	if err != nil {
		return nil, fmt.Errorf("s3: listen: %w", err)
	}
	s.ln = security.Process().Listen(s.ln, security.Public) // TLS when configured; no client certificates
	s.metrics = metrics.OrNew(cfg.Metrics)
	s.srv = httpserve.New(s.metrics.HTTP("s3", s3Op, s), s.log)
	return s, nil
}

// Addr is the host:port clients reach the gateway at (IP and the bound port).
func (s *Server) Addr() string {
	return net.JoinHostPort(s.cfg.IP, strconv.Itoa(s.ln.Addr().(*net.TCPAddr).Port))
}

// URL is the endpoint clients use.
func (s *Server) URL() string { return security.URL(s.Addr()) }

// Layer is the object layer, for in-process callers and tests.
func (s *Server) Layer() *objectapi.Layer { return s.layer }

// kmsLoop passes keys made with `kelp kms` in this gateway's key
// directory to the filer, and the other gateways' keys to the directory,
// even while no request uses the key service.
func (s *Server) kmsLoop(ctx context.Context) {
	t := time.NewTicker(kms.SharedRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.cfg.KMS.Refresh(); err != nil {
				s.log.Warn("s3: kms: refreshing the shared keys", "err", err)
			}
		}
	}
}

// Run serves until ctx ends or Close is called; it also watches the
// identity file.
func (s *Server) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	if s.cfg.ConfigFile != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.watchConfig(ctx)
		}()
	}
	if s.cfg.SharedIdentities != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.watchShared(ctx)
		}()
	}
	if every := cmp.Or(s.cfg.LifecycleInterval, time.Hour); every > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.lifecycleLoop(ctx, every)
		}()
	}
	if s.cfg.KMS != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.kmsLoop(ctx)
		}()
	}
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	s.log.Info("s3 gateway listening", "addr", s.Addr(), "buckets", s.layer.Root())
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
	}
	cancel()
	wg.Wait()
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return err
}

// Close stops serving. Idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.srv.Stop(5 * time.Second)
	})
	return s.closeErr
}

// requestID returns a unique id for a request: the process prefix and a
// sequence number.
func (s *Server) requestID() string {
	return s.reqPrefix + strconv.FormatUint(s.reqSeq.Add(1), 16)
}

// Metrics is the registry this gateway reports to.
func (s *Server) Metrics() *metrics.Registry { return s.metrics }

// s3Op is a request's operation until routing names it (metrics.SetOperation
// in ServeHTTP): requests refused before (bad signature, unknown key)
// count as "unrouted".
func s3Op(r *http.Request) string {
	if r.URL.Path == "/healthz" {
		return "healthz"
	}
	if r.Method == http.MethodOptions {
		return "PreflightRequest"
	}
	return "unrouted"
}
