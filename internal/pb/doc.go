// Package pb holds Kelp's protobuf definitions (*.proto, generated into masterpb and
// volumepb by `make proto`) and the conventions shared by every gRPC endpoint.
//
// Imported only by services and internal/client: core packages never see wire types.
package pb

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/kelpfs/kelp/internal/security"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// GRPCPortOffset is added to a server's HTTP port to find its gRPC port, so one
// host:port names a server everywhere on the command line. RaftPortOffset does
// the same for a master's Raft transport.
const (
	GRPCPortOffset = 10000
	RaftPortOffset = 20000
)

// DerivedPort is httpPort+offset, or httpPort-offset when the sum would not be
// a valid port: HTTP ports picked from the ephemeral range (32768-60999) are
// common in tests and scripts, and +10000 or +20000 runs past 65535 for many
// of them. Port 0 (pick any) stays 0.
func DerivedPort(httpPort, offset int) int {
	switch {
	case httpPort == 0:
		return 0
	case httpPort+offset <= 65535:
		return httpPort + offset
	default:
		return httpPort - offset
	}
}

// GRPCPort is the gRPC port of a server whose HTTP port is httpPort.
func GRPCPort(httpPort int) int { return DerivedPort(httpPort, GRPCPortOffset) }

// GRPCAddress turns a server's HTTP host:port into its gRPC host:port.
func GRPCAddress(httpAddr string) (string, error) {
	host, port, err := net.SplitHostPort(httpAddr)
	if err != nil {
		return "", err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(host, strconv.Itoa(GRPCPort(p))), nil
}

// Keepalive: a peer behind a cut network never closes its connection, so
// long-lived streams (heartbeats, metadata subscriptions) would hang on it
// until TCP gives up, many minutes later. Clients ping every ClientKeepalive
// and drop the connection when a ping goes unanswered; servers accept pings
// that often.
var (
	ClientKeepalive = keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}
	ServerKeepalive = keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}
)

// DialOptions are the options every Kelp gRPC client uses.
// Transport security is the process's TLS (security.Process), else none.
func DialOptions() []grpc.DialOption {
	creds := insecure.NewCredentials()
	if c := security.Process().ClientConfig(); c != nil {
		creds = credentials.NewTLS(c)
	}
	return []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithKeepaliveParams(ClientKeepalive),
	}
}

// WithDialer makes a client connect through dial (a net.Dialer.DialContext,
// or a test's network that can be cut) instead of its own TCP dial.
func WithDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) grpc.DialOption {
	return grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		return dial(ctx, "tcp", addr)
	})
}

// streamWorkers is how many goroutines a gRPC server keeps for its calls.
const streamWorkers = 32

// ServerOptions are the options every Kelp gRPC server uses: keepalive, and
// a handler panic answered codes.Internal and logged to log (see recover.go).
// With the process's TLS on, the server speaks TLS only and, when a CA is
// configured, requires a client certificate signed by it (security.Peer).
func ServerOptions(log *slog.Logger) []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.KeepaliveEnforcementPolicy(ServerKeepalive),
		// Calls run on kept goroutines, not one new goroutine each: a new
		// one starts on a small stack that a filer call grows two or three
		// times, each growth a copy walking every frame (9% of the server's
		// CPU in an untar through a mount). Calls beyond the workers busy
		// get a goroutine of their own, as without the option.
		grpc.NumStreamWorkers(streamWorkers),
		grpc.ChainUnaryInterceptor(recoverUnary(log)),
		grpc.ChainStreamInterceptor(recoverStream(log)),
	}
	if c := security.Process().ServerConfig(security.Peer); c != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(c)))
	}
	return opts
}

// Listen opens a server's HTTP and gRPC listeners on ip. grpcPort 0 means
// GRPCPort(httpPort); httpPort 0 picks a free port (and then any free gRPC
// port). The real ports are the listeners' addresses. On error nothing is
// left open. With the process's TLS on, the HTTP listener serves TLS only
// (security.ClusterHTTP); gRPC gets its TLS from ServerOptions.
func Listen(ip string, httpPort, grpcPort int) (httpLn, grpcLn net.Listener, err error) {
	if grpcPort == 0 {
		grpcPort = GRPCPort(httpPort)
	}
	httpLn, err = net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(httpPort)))
	if err != nil {
		return nil, nil, fmt.Errorf("listen HTTP: %w", err)
	}
	grpcLn, err = net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(grpcPort)))
	if err != nil {
		httpLn.Close()
		return nil, nil, fmt.Errorf("listen gRPC: %w", err)
	}
	return security.Process().Listen(httpLn, security.ClusterHTTP), grpcLn, nil
}

// Port is the TCP port a listener is bound to.
func Port(ln net.Listener) int { return ln.Addr().(*net.TCPAddr).Port }
