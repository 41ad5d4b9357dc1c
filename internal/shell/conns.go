package shell

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/pb"
	"github.com/kelpfs/kelp/internal/pb/masterpb"
	"github.com/kelpfs/kelp/internal/pb/volumepb"
)

// masterAddr is one configured master.
type masterAddr struct {
	http string // as given, host:port
	grpc string
}

// parseMasters accepts host:port (gRPC at port+10000) and host:port.grpcPort.
func parseMasters(list []string) ([]masterAddr, error) {
	var out []masterAddr
	for _, item := range list {
		for _, a := range strings.Split(item, ",") {
			a = strings.TrimSpace(a)
			if a == "" {
				continue
			}
			m, err := parseMaster(a)
			if err != nil {
				return nil, err
			}
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no master address (-master host:port)", ErrUsage)
	}
	return out, nil
}

func parseMaster(a string) (masterAddr, error) {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return masterAddr{}, fmt.Errorf("%w: master %q: %w", ErrUsage, a, err)
	}
	if http, grpcPort, ok := strings.Cut(port, "."); ok {
		if _, err := strconv.Atoi(http); err != nil {
			return masterAddr{}, fmt.Errorf("%w: master %q: bad port", ErrUsage, a)
		}
		if _, err := strconv.Atoi(grpcPort); err != nil {
			return masterAddr{}, fmt.Errorf("%w: master %q: bad gRPC port", ErrUsage, a)
		}
		return masterAddr{http: net.JoinHostPort(host, http), grpc: net.JoinHostPort(host, grpcPort)}, nil
	}
	g, err := pb.GRPCAddress(a)
	if err != nil {
		return masterAddr{}, fmt.Errorf("%w: master %q: %w", ErrUsage, a, err)
	}
	return masterAddr{http: a, grpc: g}, nil
}

// conns keeps one gRPC connection per address for the shell's lifetime.
// Safe for concurrent use (the lock renewal goroutine shares it).
type conns struct {
	masters    []masterAddr
	opts       []grpc.DialOption
	volumeOpts []grpc.DialOption // also on volume servers' connections

	mu      sync.Mutex
	current int // the master that answered last
	byAddr  map[string]*grpc.ClientConn
}

func newConns(masters []masterAddr, opts []grpc.DialOption) *conns {
	return &conns{masters: masters, opts: opts, byAddr: map[string]*grpc.ClientConn{}}
}

func (c *conns) conn(addr string) (*grpc.ClientConn, error) { return c.dial(addr, nil) }

func (c *conns) dial(addr string, extra []grpc.DialOption) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc := c.byAddr[addr]; cc != nil {
		return cc, nil
	}
	opts := append(append(pb.DialOptions(), c.opts...), extra...)
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("shell: connect %s: %w", addr, err)
	}
	c.byAddr[addr] = cc
	return cc, nil
}

func (c *conns) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for addr, cc := range c.byAddr {
		cc.Close()
		delete(c.byAddr, addr)
	}
	return nil
}

// master calls fn with each master in turn, starting with the one that
// answered last, until one does not answer Unavailable. Followers forward
// admin calls to the leader themselves, so any reachable master will do.
func (c *conns) master(ctx context.Context, fn func(masterpb.MasterClient) error) error {
	c.mu.Lock()
	start := c.current
	c.mu.Unlock()
	var last error
	for i := range c.masters {
		idx := (start + i) % len(c.masters)
		cc, err := c.conn(c.masters[idx].grpc)
		if err != nil {
			last = err
			continue
		}
		err = fn(masterpb.NewMasterClient(cc))
		if status.Code(err) == codes.Unavailable && ctx.Err() == nil {
			last = fmt.Errorf("master %s: %w", c.masters[idx].http, err)
			continue
		}
		c.mu.Lock()
		c.current = idx
		c.mu.Unlock()
		return err
	}
	return fmt.Errorf("shell: no master reachable: %w", last)
}

// volume returns a client for a volume server's gRPC address.
func (c *conns) volume(grpcAddr string) (volumepb.VolumeServerClient, error) {
	cc, err := c.dial(grpcAddr, c.volumeOpts)
	if err != nil {
		return nil, err
	}
	return volumepb.NewVolumeServerClient(cc), nil
}

// MasterHTTP is the HTTP host:port of a master given as the shell takes it
// (host:port, or host:port.grpcPort).
func MasterHTTP(a string) (string, error) {
	m, err := parseMaster(a)
	return m.http, err
}
