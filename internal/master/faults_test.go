package master

import (
	"context"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/pb/masterpb"
	"github.com/kelpfs/kelp/internal/pb/volumepb"
)

// faultyVolumeServer is a fakeVolumeServer whose admin port can be cut off
// (while its heartbeats go on) and whose AllocateVolume and DeleteVolume can
// be made to fail: the faults of a real network cut and a failed growth,
// injected in process.
type faultyVolumeServer struct {
	*fakeVolumeServer
	ln             *cutListener
	failAllocate   atomic.Bool
	failDelete     atomic.Bool
	deleteMu       sync.Mutex
	deleteRequests []uint32
}

func newFaultyVolumeServer(t *testing.T, port int, dc, rack string, maxVolumes int) *faultyVolumeServer {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &cutListener{Listener: inner}
	f := &faultyVolumeServer{
		fakeVolumeServer: &fakeVolumeServer{
			t: t, port: port, grpcPort: inner.Addr().(*net.TCPAddr).Port, dc: dc, rack: rack,
			maxVolumes: maxVolumes, pulse: 50 * time.Millisecond, changed: make(chan struct{}, 1),
			srv: grpc.NewServer(),
		},
		ln: ln,
	}
	volumepb.RegisterVolumeServerServer(f.srv, f)
	go f.srv.Serve(ln)
	t.Cleanup(f.srv.Stop)
	return f
}

func (f *faultyVolumeServer) AllocateVolume(ctx context.Context, req *volumepb.AllocateVolumeRequest) (*volumepb.AllocateVolumeResponse, error) {
	if f.failAllocate.Load() {
		return nil, status.Error(codes.Internal, "disk on fire")
	}
	return f.fakeVolumeServer.AllocateVolume(ctx, req)
}

func (f *faultyVolumeServer) DeleteVolume(ctx context.Context, req *volumepb.DeleteVolumeRequest) (*volumepb.DeleteVolumeResponse, error) {
	f.deleteMu.Lock()
	f.deleteRequests = append(f.deleteRequests, req.VolumeId)
	f.deleteMu.Unlock()
	if f.failDelete.Load() {
		return nil, status.Error(codes.Internal, "delete failed")
	}
	f.mu.Lock()
	i := slices.IndexFunc(f.volumes, func(v *masterpb.VolumeInfo) bool { return v.Id == req.VolumeId })
	if i < 0 {
		f.mu.Unlock()
		return nil, status.Errorf(codes.NotFound, "volume %d not found", req.VolumeId)
	}
	f.volumes = slices.Delete(f.volumes, i, i+1)
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
	return &volumepb.DeleteVolumeResponse{}, nil
}

func (f *faultyVolumeServer) deletes() []uint32 {
	f.deleteMu.Lock()
	defer f.deleteMu.Unlock()
	return slices.Clone(f.deleteRequests)
}

func (f *faultyVolumeServer) volumeIDs() []uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []uint32
	for _, v := range f.volumes {
		ids = append(ids, v.Id)
	}
	return ids
}

// cutListener accepts nothing while cut: it closes every connection it
// accepted when the cut starts and each new one at once, as a server whose
// advertised address no longer leads to it.
type cutListener struct {
	net.Listener
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (l *cutListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if l.cut {
			l.mu.Unlock()
			c.Close()
			continue
		}
		l.conns = append(l.conns, c)
		l.mu.Unlock()
		return c, nil
	}
}

func (l *cutListener) setCut(cut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = cut
	if cut {
		for _, c := range l.conns {
			c.Close()
		}
		l.conns = nil
	}
}

type statusServer struct {
	URL        string `json:"url"`
	Reachable  bool   `json:"reachable"`
	ProbeError string `json:"probeError"`
}

type statusJSON struct {
	VolumeServers   []statusServer `json:"volumeServers"`
	AbandonedCopies []struct {
		VolumeID uint32 `json:"volumeId"`
		URL      string `json:"url"`
	} `json:"abandonedCopies"`
}

func clusterStatusJSON(t *testing.T, s *Server) statusJSON {
	t.Helper()
	var st statusJSON
	if code := getJSON(t, "GET", "http://"+s.HTTPAddr()+"/cluster/status", &st); code != 200 {
		t.Fatalf("/cluster/status: %d", code)
	}
	return st
}

func serverStatus(t *testing.T, s *Server, url string) (statusServer, bool) {
	t.Helper()
	for _, n := range clusterStatusJSON(t, s).VolumeServers {
		if n.URL == url {
			return n, true
		}
	}
	return statusServer{}, false
}
