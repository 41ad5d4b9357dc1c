package pb

import (
	"errors"
	"sync"

	"google.golang.org/grpc"
)

// ConnPool keeps one gRPC client connection per address, dialled with
// DialOptions on first use and shared after (gRPC multiplexes calls on it).
// The zero value is ready; it is safe for concurrent use.
type ConnPool struct {
	// Options are added to DialOptions (credentials: a server token).
	Options []grpc.DialOption
	mu      sync.Mutex
	conns   map[string]*grpc.ClientConn
}

// Get returns the connection to addr ("host:port" of a gRPC server).
func (p *ConnPool) Get(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cc := p.conns[addr]; cc != nil {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, append(DialOptions(), p.Options...)...)
	if err != nil {
		return nil, err
	}
	if p.conns == nil {
		p.conns = map[string]*grpc.ClientConn{}
	}
	p.conns[addr] = cc
	return cc, nil
}

// Close closes every connection; the pool may be used again after.
func (p *ConnPool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, cc := range p.conns {
		errs = append(errs, cc.Close())
	}
	p.conns = nil
	return errors.Join(errs...)
}
