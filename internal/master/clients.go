package master

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/kelpfs/kelp/internal/pb"
	"github.com/kelpfs/kelp/internal/pb/volumepb"
	"github.com/kelpfs/kelp/internal/topology"
)

// allocateTimeout bounds one AllocateVolume call.
const allocateTimeout = 30 * time.Second

// volumeClients calls the volume servers' admin API over one gRPC
// connection each.
type volumeClients struct{ pb.ConnPool }

func (c *volumeClients) conn(addr string) (*grpc.ClientConn, error) {
	cc, err := c.Get(addr)
	if err != nil {
		return nil, fmt.Errorf("master: dial volume server %s: %w", addr, err)
	}
	return cc, nil
}

// grpcAddr is the volume server's gRPC address: the port it reported, or its
// HTTP port + 10000.
func grpcAddr(loc topology.Location) (string, error) {
	host, port, err := net.SplitHostPort(loc.URL)
	if err != nil {
		return "", fmt.Errorf("master: volume server url %q: %w", loc.URL, err)
	}
	gp := loc.GRPCPort
	if gp == 0 {
		p, err := strconv.Atoi(port)
		if err != nil {
			return "", fmt.Errorf("master: volume server url %q: bad port", loc.URL)
		}
		gp = pb.GRPCPort(p)
	}
	return net.JoinHostPort(host, strconv.Itoa(gp)), nil
}

// allocate creates a volume on one server and returns the copy for
// topology.RegisterVolume.
func (c *volumeClients) allocate(ctx context.Context, loc topology.Location, vid uint32, key topology.LayoutKey) (topology.NewCopy, error) {
	addr, err := grpcAddr(loc)
	if err != nil {
		return topology.NewCopy{}, err
	}
	cc, err := c.conn(addr)
	if err != nil {
		return topology.NewCopy{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, allocateTimeout)
	defer cancel()
	resp, err := volumepb.NewVolumeServerClient(cc).AllocateVolume(ctx, &volumepb.AllocateVolumeRequest{
		VolumeId: vid, Collection: key.Collection, Replication: key.Replication.String(), Ttl: key.TTL.String(),
	})
	if err != nil {
		return topology.NewCopy{}, fmt.Errorf("allocate on %s: %w", loc.URL, err)
	}
	return topology.NewCopy{URL: loc.URL, HeartbeatSequence: resp.GetHeartbeatSequence()}, nil
}

// streamRegistry remembers which heartbeat stream is a node's current one, so
// that an old stream closing after the node reconnected does not drop it.
type streamRegistry struct {
	mu      sync.Mutex
	next    uint64
	current map[string]uint64
}

func (r *streamRegistry) register(url string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.current == nil {
		r.current = map[string]uint64{}
	}
	r.next++
	r.current[url] = r.next
	return r.next
}

// release reports whether id was still the node's current stream.
func (r *streamRegistry) release(url string, id uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.current[url] != id {
		return false
	}
	delete(r.current, url)
	return true
}

// has reports whether the node has a heartbeat stream open to this master.
func (r *streamRegistry) has(url string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.current[url]
	return ok
}
