package master

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/kelpfs/kelp/internal/consensus"
	"github.com/kelpfs/kelp/internal/pb"
	"github.com/kelpfs/kelp/internal/pb/masterpb"
	"github.com/kelpfs/kelp/internal/security"
)

// Followers serve leader-only requests by forwarding them to the leader and
// relaying its answer: clients need not know who leads. A forwarded request
// is marked (HTTP header, gRPC metadata) and a master that is not the leader
// either does not forward a marked request again: during an election two
// followers could otherwise bounce it between them.
const (
	forwardedHeader = "X-Kelp-Forwarded-By"
	forwardedMD     = "x-kelp-forwarded-by"
)

type leaderAddrKey struct{}

// fallbackKey carries the local handler to use when the leader cannot be
// reached (lookups answered from this master's own topology).
type fallbackKey struct{}

// newLeaderProxy builds the HTTP reverse proxy to the leader, the client
// used to probe the other masters, and the client of this master's own
// requests to the leader (GrowVolumes; bounded by their contexts).
func newLeaderProxy(s *Server) (*httputil.ReverseProxy, *http.Client, *http.Client) {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSClientConfig:     security.Process().ClientConfig(),
	}
	proxy := &httputil.ReverseProxy{
		Transport: tr,
		Rewrite: func(pr *httputil.ProxyRequest) {
			leader, _ := pr.In.Context().Value(leaderAddrKey{}).(string)
			pr.Out.URL.Scheme = security.Scheme()
			pr.Out.URL.Host = leader
			pr.Out.Host = leader
			pr.Out.Header.Set(forwardedHeader, s.httpAddr)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if fb, ok := r.Context().Value(fallbackKey{}).(http.HandlerFunc); ok && r.Context().Err() == nil {
				fb(w, r)
				return
			}
			leader, _ := r.Context().Value(leaderAddrKey{}).(string)
			writeError(w, fmt.Errorf("%w: forwarding to %s: %v", ErrLeaderUnreachable, leader, err))
		},
	}
	return proxy, &http.Client{Transport: tr, Timeout: 2 * time.Second}, &http.Client{Transport: tr}
}

// onLeader serves h on the leader and forwards the request to the leader on
// any other master. fallback, when not nil, answers instead when no leader
// is known or it cannot be reached.
func (s *Server) onLeader(h, fallback http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cons.IsLeader() {
			h(w, r)
			return
		}
		leader := s.leader()
		if leader == "" || leader == s.httpAddr || r.Header.Get(forwardedHeader) != "" {
			if fallback != nil {
				fallback(w, r)
				return
			}
			writeNotLeader(w, s.notLeader(), leader)
			return
		}
		ctx := context.WithValue(r.Context(), leaderAddrKey{}, leader)
		if fallback != nil {
			ctx = context.WithValue(ctx, fallbackKey{}, fallback)
		}
		s.proxy.ServeHTTP(w, r.WithContext(ctx))
	}
}

// writeNotLeader answers 503 with the leader's address when known, which
// internal/client follows.
func writeNotLeader(w http.ResponseWriter, err error, leader string) {
	body := map[string]string{"error": err.Error()}
	if leader != "" {
		body["leader"] = leader
	}
	writeJSON(w, httpStatus(err), body)
}

// notLeaderError is consensus.ErrNotLeader with the leader's HTTP address,
// "" when none is known.
type notLeaderError struct{ leader string }

func (e *notLeaderError) Error() string {
	if e.leader == "" {
		return consensus.ErrNotLeader.Error() + "; no leader is elected"
	}
	return consensus.ErrNotLeader.Error() + "; the leader is " + e.leader
}

func (e *notLeaderError) Unwrap() error { return consensus.ErrNotLeader }

func (s *Server) notLeader() error { return &notLeaderError{leader: s.leader()} }

// leaderClient returns the leader's gRPC client when this master must
// forward the call, or nil when it serves the call itself.
func (s *Server) leaderClient(ctx context.Context) (masterpb.MasterClient, error) {
	if s.cons.IsLeader() {
		return nil, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	leader := s.leader()
	if leader == "" || leader == s.httpAddr || len(md.Get(forwardedMD)) > 0 {
		return nil, s.notLeader()
	}
	cc, err := s.masterClients.conn(leader)
	if err != nil {
		return nil, err
	}
	return masterpb.NewMasterClient(cc), nil
}

// forwardCtx marks an outgoing call as forwarded by this master, keeping the
// caller's deadline.
func (s *Server) forwardCtx(ctx context.Context) context.Context {
	kv := []string{forwardedMD, s.httpAddr}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		// The leader authenticates the caller again, from the same token.
		for _, v := range md.Get("authorization") {
			kv = append(kv, "authorization", v)
		}
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// forward runs call on the leader when this master is not the leader.
// handled is false when the caller must serve the request itself.
func forward[Req, Resp any](s *Server, ctx context.Context, req Req,
	call func(masterpb.MasterClient, context.Context, Req, ...grpc.CallOption) (Resp, error),
) (resp Resp, handled bool, err error) {
	c, err := s.leaderClient(ctx)
	if err != nil {
		return resp, true, grpcError(err)
	}
	if c == nil {
		return resp, false, nil
	}
	resp, err = call(c, s.forwardCtx(ctx), req)
	return resp, true, err
}

// masterClients calls the other masters over one gRPC connection each,
// keyed by gRPC address (derived from the HTTP one the usual way).
type masterClients struct{ pb.ConnPool }

func (c *masterClients) conn(httpAddr string) (*grpc.ClientConn, error) {
	addr, err := pb.GRPCAddress(httpAddr)
	if err != nil {
		return nil, fmt.Errorf("master: master address %q: %w", httpAddr, err)
	}
	cc, err := c.Get(addr)
	if err != nil {
		return nil, fmt.Errorf("master: dial master %s: %w", addr, err)
	}
	return cc, nil
}
