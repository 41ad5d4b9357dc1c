package auth

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Role is what an identity may do.
type Role int

const (
	RoleNone  Role = iota
	RoleRead       // read-only: lookups, reads, listings, subscriptions
	RoleWrite      // read-write: everything
)

func (r Role) String() string {
	switch r {
	case RoleRead:
		return "ro"
	case RoleWrite:
		return "rw"
	}
	return "none"
}

// ParseRole accepts ro/read/read-only and rw/write/read-write/admin.
func ParseRole(s string) (Role, error) {
	switch strings.ToLower(s) {
	case "ro", "read", "read-only", "readonly":
		return RoleRead, nil
	case "rw", "write", "read-write", "readwrite", "admin":
		return RoleWrite, nil
	}
	return RoleNone, fmt.Errorf("unknown role %q (want ro or rw)", s)
}

// Identity is who made a request.
type Identity struct {
	Name string
	Role Role
}

// Access authenticates requests to the filer's and the master's APIs: bearer
// access tokens (from a tokens file, re-read when it changes, or added at
// start), server tokens of a Signer (servers holding the JWT signing key),
// and verified mTLS client certificates (servers, read-write). A nil
// *Access lets everything through.
type Access struct {
	file *watched // the tokens file; nil: none

	mu     sync.RWMutex
	tokens map[[32]byte]Identity // the file's, by SHA-256 of the token
	added  map[[32]byte]Identity // Add's (in-process gateways), kept across reloads
	server *Signer
	vouch  bool // also admin tokens of server (AcceptVouched)
}

// AcceptVouched makes a accept, besides its own tokens, the admin tokens a
// master signs for the clients it authenticated (Signer.AdminToken): the
// volume servers' admin API, so a volume server needs no copy of the
// masters' tokens file. It needs a signer; returns a.
func (a *Access) AcceptVouched() *Access {
	if a != nil && a.server != nil {
		a.vouch = true
	}
	return a
}

// NewAccess returns an Access with the tokens of file (may be ""), also
// accepting server tokens of server (may be nil). It returns nil when
// neither is given: authentication is off. The file is re-read when it
// changes (at most every ReloadInterval): tokens added to it are accepted
// and tokens removed refused, without a restart; a version that does not
// parse is refused whole and the previous one kept.
func NewAccess(file string, server *Signer) (*Access, error) {
	if file == "" && server == nil {
		return nil, nil
	}
	a := &Access{tokens: map[[32]byte]Identity{}, added: map[[32]byte]Identity{}, server: server}
	if file != "" {
		a.file = &watched{path: file, load: func(body []byte) error {
			toks, err := parseTokens(file, body)
			if err != nil {
				return err
			}
			a.mu.Lock()
			a.tokens = toks
			a.mu.Unlock()
			return nil
		}}
		if err := a.file.init(); err != nil {
			return nil, fmt.Errorf("access tokens: %w", err)
		}
	}
	return a, nil
}

// parseTokens reads a tokens file: one "NAME ROLE TOKEN" a line; # comments.
func parseTokens(file string, body []byte) (map[[32]byte]Identity, error) {
	toks := map[[32]byte]Identity{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 3 {
			return nil, fmt.Errorf("%s line %d: want NAME ROLE TOKEN", file, n)
		}
		role, err := ParseRole(fs[1])
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", file, n, err)
		}
		if len(fs[2]) < 16 {
			return nil, fmt.Errorf("%s line %d: token shorter than 16 characters", file, n)
		}
		toks[sha256.Sum256([]byte(fs[2]))] = Identity{Name: fs[0], Role: role}
	}
	return toks, sc.Err()
}

// Add accepts token as name with role (whatever the tokens file says).
func (a *Access) Add(token, name string, role Role) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.added[sha256.Sum256([]byte(token))] = Identity{Name: name, Role: role}
}

// NewToken returns a fresh random token (32 hex bytes of entropy).
func NewToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Enabled reports whether requests must authenticate.
func (a *Access) Enabled() bool { return a != nil }

func (a *Access) token(tok string) (Identity, bool) {
	if tok == "" {
		return Identity{}, false
	}
	a.file.refresh()
	h := sha256.Sum256([]byte(tok))
	a.mu.RLock()
	id, ok := a.tokens[h]
	if !ok {
		id, ok = a.added[h]
	}
	a.mu.RUnlock()
	if ok {
		return id, true
	}
	if a.server != nil && IsJWT(tok) {
		if a.server.VerifyServer(tok) == nil {
			return Identity{Name: "server", Role: RoleWrite}, true
		}
		if a.vouch {
			if id, err := a.server.VerifyAdmin(tok); err == nil {
				return id, true
			}
		}
	}
	return Identity{}, false
}

func certIdentity(chains [][]*x509.Certificate) (Identity, bool) {
	if len(chains) == 0 || len(chains[0]) == 0 {
		return Identity{}, false
	}
	return Identity{Name: "mtls:" + chains[0][0].Subject.CommonName, Role: RoleWrite}, true
}

// FromHTTP authenticates r: a verified client certificate, or a bearer token.
func (a *Access) FromHTTP(r *http.Request) (Identity, bool) {
	if a == nil {
		return Identity{Name: "anonymous", Role: RoleWrite}, true
	}
	if r.TLS != nil {
		if id, ok := certIdentity(r.TLS.VerifiedChains); ok {
			return id, true
		}
	}
	return a.token(Bearer(r.Header.Get("Authorization")))
}

// FromGRPC authenticates a gRPC call from its context.
func (a *Access) FromGRPC(ctx context.Context) (Identity, bool) {
	if a == nil {
		return Identity{Name: "anonymous", Role: RoleWrite}, true
	}
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			if id, ok := certIdentity(ti.State.VerifiedChains); ok {
				return id, true
			}
		}
	}
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if id, ok := a.token(Bearer(v)); ok {
			return id, true
		}
	}
	return Identity{}, false
}

// HTTP wraps next: need says what a request needs (RoleNone: open). A
// request that does not authenticate gets 401, one whose role is too weak
// 403, both before next sees them. Requests needing RoleWrite are audited
// (audit may be nil). A nil Access with a nil audit returns next.
func (a *Access) HTTP(service string, next http.Handler, need func(*http.Request) Role, audit *Audit) http.Handler {
	if a == nil && audit == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		role := need(r)
		if role == RoleNone {
			next.ServeHTTP(w, r)
			return
		}
		write := role == RoleWrite
		id, ok := a.FromHTTP(r)
		if !ok {
			if write {
				audit.Log(Event{Service: service, Remote: RemoteHost(r.RemoteAddr), Action: r.Method, Target: r.URL.Path, Status: http.StatusUnauthorized})
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="kelp"`)
			http.Error(w, service+": authentication required (Authorization: Bearer TOKEN)", http.StatusUnauthorized)
			return
		}
		if id.Role < role {
			audit.Log(Event{Service: service, Who: id.Name, Role: id.Role.String(), Remote: RemoteHost(r.RemoteAddr), Action: r.Method, Target: r.URL.Path, Status: http.StatusForbidden})
			http.Error(w, service+": "+id.Name+" has a read-only role", http.StatusForbidden)
			return
		}
		if !write || audit == nil {
			next.ServeHTTP(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		audit.Log(Event{Service: service, Who: id.Name, Role: id.Role.String(), Remote: RemoteHost(r.RemoteAddr), Action: r.Method, Target: r.URL.Path, Status: sw.status})
	})
}

type statusWriter struct {
	http.ResponseWriter
	status  int
	written bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.written {
		w.status, w.written = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.written = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// RemoteHost is the host part of a remote address.
func RemoteHost(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

func grpcRemote(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return RemoteHost(p.Addr.String())
	}
	return ""
}

// check authenticates a gRPC call of method.
func (a *Access) check(ctx context.Context, service, method string, need func(string) Role, audit *Audit) (Identity, bool, error) {
	role := need(method)
	if role == RoleNone {
		return Identity{}, false, nil
	}
	write := role == RoleWrite
	id, ok := a.FromGRPC(ctx)
	if !ok {
		if write {
			audit.Log(Event{Service: service, Remote: grpcRemote(ctx), Action: "grpc", Target: method, Status: http.StatusUnauthorized})
		}
		return id, write, status.Error(codes.Unauthenticated, service+": authentication required")
	}
	if id.Role < role {
		audit.Log(Event{Service: service, Who: id.Name, Role: id.Role.String(), Remote: grpcRemote(ctx), Action: "grpc", Target: method, Status: http.StatusForbidden})
		return id, write, status.Error(codes.PermissionDenied, service+": "+id.Name+" has a read-only role")
	}
	return id, write, nil
}

func grpcStatus(err error) int {
	switch status.Code(err) {
	case codes.OK:
		return http.StatusOK
	case codes.NotFound:
		return http.StatusNotFound
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.AlreadyExists, codes.Aborted:
		return http.StatusConflict
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// GRPC returns the server interceptors enforcing a (unary and stream).
// need says what each full method name needs. With a nil Access and a nil
// audit it returns no options.
func (a *Access) GRPC(service string, need func(method string) Role, audit *Audit) []grpc.ServerOption {
	if a == nil && audit == nil {
		return nil
	}
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		id, write, err := a.check(ctx, service, info.FullMethod, need, audit)
		if err != nil {
			return nil, err
		}
		resp, err := h(ctx, req)
		if write {
			audit.Log(Event{Service: service, Who: id.Name, Role: id.Role.String(), Remote: grpcRemote(ctx), Action: "grpc", Target: info.FullMethod, Status: grpcStatus(err)})
		}
		return resp, err
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		id, write, err := a.check(ss.Context(), service, info.FullMethod, need, audit)
		if err != nil {
			return err
		}
		err = h(srv, ss)
		if write {
			audit.Log(Event{Service: service, Who: id.Name, Role: id.Role.String(), Remote: grpcRemote(ss.Context()), Action: "grpc", Target: info.FullMethod, Status: grpcStatus(err)})
		}
		return err
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream)}
}

// bearerCreds sends a bearer token with every gRPC call.
type bearerCreds struct{ tok func() string }

func (b bearerCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	t := b.tok()
	if t == "" {
		return nil, nil
	}
	return map[string]string{"authorization": "Bearer " + t}, nil
}

func (bearerCreds) RequireTransportSecurity() bool { return false }

// DialOption returns the gRPC dial option sending tok() (skipped when ""),
// or nil when tok is nil.
func DialOption(tok func() string) grpc.DialOption {
	if tok == nil {
		return nil
	}
	return grpc.WithPerRPCCredentials(bearerCreds{tok})
}

// Transport sets "Authorization: Bearer tok()" on requests that carry no
// Authorization header yet.
type Transport struct {
	Token func() string
	Next  http.RoundTripper
}

func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	next := t.Next
	if next == nil {
		next = http.DefaultTransport
	}
	if tok := t.Token(); tok != "" && r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	return next.RoundTrip(r)
}

// CloseIdleConnections closes Next's idle connections.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.Next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Static returns a token function for a fixed token ("" sends none).
func Static(tok string) func() string { return func() string { return tok } }

// TokenFromFlag resolves a client's --access.token: "@FILE" reads the
// token from FILE (first line), anything else is the token itself.
func TokenFromFlag(v string) (string, error) {
	if !strings.HasPrefix(v, "@") {
		return v, nil
	}
	b, err := os.ReadFile(v[1:])
	if err != nil {
		return "", fmt.Errorf("access token: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line), nil
}

// Vouched returns a token function for the volume servers' admin API: it
// asks the masters (HTTP host:port, tried in turn) for an admin token
// vouching for the holder of token (GET /admin/token), caches it for half
// its life, and answers "" when no master gives one (no signing key, or
// an old master): the caller's own token is then all it shows.
func Vouched(masters []string, url func(hostport string) string, token string, hc *http.Client) func() string {
	var mu sync.Mutex
	var cached string
	var until time.Time
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		if cached != "" && time.Now().Before(until) {
			return cached
		}
		for _, m := range masters {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url(m)+"/admin/token", nil)
			if err != nil {
				cancel()
				continue
			}
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := hc.Do(req)
			if err != nil {
				cancel()
				continue
			}
			var body struct {
				Auth    string `json:"auth"`
				Expires int    `json:"expiresInSeconds"`
			}
			err = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body)
			resp.Body.Close()
			cancel()
			if err != nil || resp.StatusCode != http.StatusOK || body.Auth == "" {
				continue
			}
			cached, until = body.Auth, time.Now().Add(time.Duration(body.Expires)*time.Second/2)
			return cached
		}
		return ""
	}
}
