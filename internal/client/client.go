package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/localread"
	"github.com/kelpfs/kelp/internal/security"
)

// ErrNotFound matches (errors.Is) any 404 answer: an unknown volume on lookup,
// a missing or deleted needle on read or delete.
var ErrNotFound = errors.New("client: not found")

// ErrNoMaster is returned (wrapped) when no master could be reached.
var ErrNoMaster = errors.New("client: no master reachable")

// ErrConfig is returned (wrapped) by New for an unusable Config.
var ErrConfig = errors.New("client: bad config")

// HTTPError is a non-2xx answer from a master or volume server.
type HTTPError struct {
	Method  string
	URL     string
	Status  int
	Message string // the server's {"error": ...}, or the start of its body
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("client: %s %s: %d %s: %s", e.Method, e.URL, e.Status, http.StatusText(e.Status), e.Message)
}

// Is makes a 404 match ErrNotFound.
func (e *HTTPError) Is(target error) bool {
	return target == ErrNotFound && e.Status == http.StatusNotFound
}

// Config configures a Client. Only Masters is required.
type Config struct {
	// Masters are master addresses, "host:port" or "http://host:port"; a
	// single entry may itself be a comma-separated list.
	Masters []string
	// HTTPClient is used for every request; nil means NewHTTPClient().
	HTTPClient *http.Client
	// Logger receives retries and fail-overs at debug level; nil discards.
	Logger *slog.Logger
	// MasterWait is how long assign and lookup keep retrying, with backoff,
	// while no master can answer (all unreachable, no leader elected yet, a
	// new leader still learning the topology): longer than an election,
	// short enough to fail a request with a clear error. 0 means 10 s; a
	// negative value means one round over the masters and no retry. The
	// context's deadline, when sooner, wins. Put shares one MasterWait
	// between all its assigns.
	MasterWait time.Duration
	// MaxRetries bounds Put's extra attempts with a new assignment; 0 means
	// 3, a negative value means no retry.
	MaxRetries int
	// LookupTTL is how long a volume's locations are cached; 0 means 10 minutes.
	LookupTTL time.Duration
	// Now is the clock for the lookup cache; nil means time.Now.
	Now func() time.Time
	// AnswerTimeout is how long a volume server may take to begin answering
	// a request without a body; 0 means 10 s. See doVolume.
	AnswerTimeout time.Duration
	// FailoverAfter is how long a read waits for a replica's answer to begin
	// before it tries the next replica; 0 means 1 s. The last replica left
	// gets AnswerTimeout. A replica that failed is tried last from then on,
	// until it answers again (see health.go).
	FailoverAfter time.Duration
	// AssignBatch > 1 makes Put reserve that many keys per assign and use
	// them for later Puts (see keyblock.go); 0 or 1 is one assign per file.
	AssignBatch int
	// AccessToken, when set, returns the bearer token sent to the masters
	// (their mutating APIs need one when authentication is on).
	AccessToken func() string
	// Signer, when set (a holder of the JWT signing key: the filer), signs
	// the file token of deletes and of uploads whose assignment carried
	// none; ReadSigner signs reads (volume servers with a read key).
	Signer     *auth.Signer
	ReadSigner *auth.Signer
	// LocalReads makes Get read the needles of volume servers on this host
	// through their Unix sockets (internal/localread; local.go), with HTTP
	// as the fall-back. Close releases its connections.
	LocalReads bool
}

// Client is a Kelp cluster client. It is safe for concurrent use.
type Client struct {
	masters    []string // base URLs, "http://host:port", in configured order
	current    atomic.Pointer[string]
	hc         *http.Client
	rt         http.RoundTripper // hc's transport when it is safe to skip hc, see New
	log        *slog.Logger
	maxRetries int
	masterWait time.Duration
	lookupTTL  time.Duration
	now        func() time.Time
	// answerTimeout bounds the wait for a volume server's answer to begin.
	answerTimeout time.Duration
	// failoverAfter bounds the wait for a read's answer to begin when
	// another replica could serve it.
	failoverAfter time.Duration
	assignBatch   int
	local         *localread.Reader // nil: reads take HTTP only
	accessToken   func() string
	signer        *auth.Signer
	readSigner    *auth.Signer
	keys          keyBlocks
	health        healthTable
	routes        routeCache // EC volumes' route tables (ecroute.go)

	mu    sync.RWMutex
	cache map[uint32]cacheEntry

	bufs sync.Pool // *bytes.Buffer for small JSON answers
}

// New checks cfg and returns a Client. It does not contact the cluster.
func New(cfg Config) (*Client, error) {
	var masters []string
	for _, m := range cfg.Masters {
		for _, a := range strings.Split(m, ",") {
			if a = strings.TrimSpace(a); a != "" {
				masters = append(masters, baseURL(a))
			}
		}
	}
	if len(masters) == 0 {
		return nil, fmt.Errorf("%w: no master address", ErrConfig)
	}
	c := &Client{
		masters:    masters,
		hc:         cfg.HTTPClient,
		log:        cfg.Logger,
		maxRetries: cfg.MaxRetries,
		masterWait: cfg.MasterWait,
		lookupTTL:  cfg.LookupTTL,
		now:        cfg.Now,
		cache:      make(map[uint32]cacheEntry),
	}
	if cfg.LocalReads {
		c.local = localread.NewReader()
	}
	if c.hc == nil {
		c.hc = NewHTTPClient()
	}
	// Volume server requests never redirect and need no cookies, so when the
	// http.Client adds nothing else (timeout, jar, redirect policy) they go
	// straight to its transport: http.Client.Do copies the headers and URL of
	// every request for redirects, a cost the data path does not need.
	if c.hc.Timeout == 0 && c.hc.Jar == nil && c.hc.CheckRedirect == nil {
		c.rt = c.hc.Transport
		if c.rt == nil {
			c.rt = http.DefaultTransport
		}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.maxRetries == 0:
		c.maxRetries = 3
	case c.maxRetries < 0:
		c.maxRetries = 0
	}
	switch {
	case c.masterWait == 0:
		c.masterWait = 10 * time.Second
	case c.masterWait < 0:
		c.masterWait = 0
	}
	if c.lookupTTL <= 0 {
		c.lookupTTL = 10 * time.Minute
	}
	if c.now == nil {
		c.now = time.Now
	}
	c.assignBatch = cfg.AssignBatch
	c.accessToken, c.signer, c.readSigner = cfg.AccessToken, cfg.Signer, cfg.ReadSigner
	c.answerTimeout = cfg.AnswerTimeout
	if c.answerTimeout <= 0 {
		c.answerTimeout = 10 * time.Second
	}
	c.failoverAfter = cfg.FailoverAfter
	if c.failoverAfter <= 0 {
		c.failoverAfter = time.Second
	}
	c.current.Store(&c.masters[0])
	c.bufs.New = func() any { return new(bytes.Buffer) }
	return c, nil
}

// NewHTTPClient returns the client New uses by default: HTTP/1.1 with
// keep-alive and a deep idle pool per host, because Kelp traffic is many
// small concurrent requests to a few hosts, where a new TCP connection costs
// more than the request itself. Compression is off: needles are stored and
// served as they are, and gzip would only burn CPU on both sides.
// There is no overall timeout (large bodies may take long); callers bound
// requests with their context.
func NewHTTPClient() *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Client{Transport: &http.Transport{
		Proxy:                 nil, // cluster traffic never goes through a proxy
		DialContext:           dialBodyConns(d.DialContext),
		MaxIdleConns:          4096,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		ForceAttemptHTTP2:     false,
		WriteBufferSize:       32 << 10,
		ReadBufferSize:        32 << 10,
		TLSClientConfig:       security.Process().ClientConfig(), // nil: TLS off
	}}
}

// baseURL turns "host:port" into "http://host:port" ("https" with the
// process's TLS on); an address that already has a scheme is kept. A
// trailing slash is dropped.
func baseURL(addr string) string {
	addr = strings.TrimRight(addr, "/")
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		return addr
	}
	return security.URL(addr)
}

// doVolume sends a request to a volume server and reports the outcome to
// the health table (health.go).
//
// A volume server behind a cut network, or a frozen one, never answers and
// its kept-alive connection never breaks, so the answer must begin within
// answerWithin (0: Config.AnswerTimeout) plus 1 s per MiB of body to send
// (generous for a slow link, short next to TCP's own patience with a dead
// peer); otherwise the request fails with ErrNoAnswer, which Put retries on
// another assignment and reads fail over from. Once the answer begins, its
// body may take as long as it needs.
func (c *Client) doVolume(req *http.Request, answerWithin time.Duration) (*http.Response, error) {
	parent := req.Context()
	ctx, cancel := context.WithCancel(parent)
	if answerWithin <= 0 {
		answerWithin = c.answerTimeout
	}
	deadline := answerWithin + time.Duration(max(req.ContentLength, 0)>>20)*time.Second
	timer := time.AfterFunc(deadline, cancel)
	req = req.WithContext(ctx)
	server := req.URL.Host
	start := time.Now()
	var resp *http.Response
	var err error
	if c.rt != nil {
		resp, err = c.rt.RoundTrip(req)
	} else {
		resp, err = c.hc.Do(req)
	}
	if !timer.Stop() && parent.Err() == nil {
		if err == nil {
			resp.Body.Close()
		}
		cancel()
		c.health.failed(server, time.Now())
		return nil, fmt.Errorf("%w from %s within %v", ErrNoAnswer, server, deadline)
	}
	if err != nil {
		cancel()
		if parent.Err() == nil {
			c.health.failed(server, time.Now())
		}
		return nil, err
	}
	if resp.StatusCode >= 500 && resp.StatusCode != http.StatusInsufficientStorage && isRead(req) {
		// A read's 5xx is the server's trouble (disk, replica state). A
		// write's is often the volume's (full, read-only) and says nothing
		// of the server's health.
		c.health.failed(server, time.Now())
	} else {
		c.health.answered(server, time.Since(start), isRead(req))
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// doMaster sends a request to a master; its answer, too, must begin within
// Config.AnswerTimeout. A kept-alive connection whose other end is gone (a
// cut network, or this process's own address changed under it: a container
// reconnected to its network) never breaks by itself and would hold the
// request until its context ends instead of moving on to the next master.
// Masters may redirect, so it goes through the http.Client; masters are not
// volume servers, so the health table is left alone.
func (c *Client) doMaster(req *http.Request) (*http.Response, error) {
	parent := req.Context()
	ctx, cancel := context.WithCancel(parent)
	timer := time.AfterFunc(c.answerTimeout, cancel)
	if c.accessToken != nil {
		if tok := c.accessToken(); tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	resp, err := c.hc.Do(req.WithContext(ctx))
	if !timer.Stop() && parent.Err() == nil {
		if err == nil {
			resp.Body.Close()
		}
		cancel()
		return nil, fmt.Errorf("%w from master %s within %v", ErrNoAnswer, req.URL.Host, c.answerTimeout)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

func isRead(req *http.Request) bool {
	return req.Method == http.MethodGet || req.Method == http.MethodHead
}

// ErrNoAnswer is returned (wrapped) when a volume server did not begin to
// answer in time.
var ErrNoAnswer = errors.New("client: no answer")

// cancelOnClose releases a request's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// getBuf and putBuf recycle the buffers that hold small JSON answers, so a
// request allocates only the strings it returns.
func (c *Client) getBuf() *bytes.Buffer {
	b := c.bufs.Get().(*bytes.Buffer)
	b.Reset()
	return b
}

func (c *Client) putBuf(b *bytes.Buffer) {
	if b.Cap() <= 64<<10 { // don't pin a buffer a rare big answer grew
		c.bufs.Put(b)
	}
}

// maxJSONAnswer bounds how much of a JSON answer or error body is read.
const maxJSONAnswer = 4 << 20

// readAnswer reads resp's body (bounded) into a pooled buffer and closes it.
// Reading to the end lets the connection go back to the idle pool.
func (c *Client) readAnswer(resp *http.Response) (*bytes.Buffer, error) {
	defer resp.Body.Close()
	b := c.getBuf()
	if _, err := b.ReadFrom(io.LimitReader(resp.Body, maxJSONAnswer)); err != nil {
		c.putBuf(b)
		return nil, fmt.Errorf("client: reading answer from %s: %w", resp.Request.URL.Host, err)
	}
	return b, nil
}

// httpError builds the error for a non-2xx answer, reading and closing the body.
// It also returns the leader hint, if the body carried one.
func (c *Client) httpError(resp *http.Response) (*HTTPError, string) {
	e := &HTTPError{Method: resp.Request.Method, URL: resp.Request.URL.String(), Status: resp.StatusCode}
	b, err := c.readAnswer(resp)
	if err != nil {
		e.Message = err.Error()
		return e, ""
	}
	defer c.putBuf(b)
	var ans errorAnswer
	if decodeErrorAnswer(b.Bytes(), &ans) && ans.Error != "" {
		e.Message = ans.Error
		return e, ans.Leader
	}
	msg := strings.TrimSpace(b.String())
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	e.Message = msg
	return e, ans.Leader
}

// drainClose discards what is left of a body so the connection can be reused,
// but gives up on a big remainder: closing is cheaper than reading megabytes.
func drainClose(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, 64<<10)
	body.Close()
}

// retryable reports whether a failed volume-server request may succeed
// elsewhere: a connection error, a 5xx (including 507 volume full), a 404
// (the volume moved or is gone from that server), 408 or 429. A context
// error never is.
func retryable(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	var he *HTTPError
	if errors.As(err, &he) {
		return he.Status >= 500 || he.Status == http.StatusNotFound ||
			he.Status == http.StatusRequestTimeout || he.Status == http.StatusTooManyRequests
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
