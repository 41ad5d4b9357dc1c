package master

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kelpfs/kelp/internal/pb/masterpb"
	"github.com/kelpfs/kelp/internal/pb/volumepb"
)

// fakeVolumeServer is a volume server reduced to what the master sees: a real
// gRPC AllocateVolume that records calls, and a heartbeat stream that sends
// the full state on connect, on change and every pulse.
type fakeVolumeServer struct {
	volumepb.UnimplementedVolumeServerServer
	t          *testing.T
	port       int // pretend HTTP port; only its identity matters
	grpcPort   int
	dc, rack   string
	maxVolumes int
	pulse      time.Duration

	mu      sync.Mutex
	seq     uint64 // heartbeat sequence, as a real volume server numbers them
	volumes []*masterpb.VolumeInfo
	calls   []*volumepb.AllocateVolumeRequest
	changed chan struct{}

	srv *grpc.Server

	hbCancel context.CancelFunc
	hbStop   chan struct{} // stops the sender without touching the stream
	hbDone   chan struct{}
	hbStream grpc.BidiStreamingClient[masterpb.HeartbeatRequest, masterpb.HeartbeatResponse]
}

func newFakeVolumeServer(t *testing.T, port int, dc, rack string, maxVolumes int) *fakeVolumeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeVolumeServer{
		t: t, port: port, grpcPort: ln.Addr().(*net.TCPAddr).Port, dc: dc, rack: rack,
		maxVolumes: maxVolumes, pulse: 50 * time.Millisecond, changed: make(chan struct{}, 1),
		srv: grpc.NewServer(),
	}
	volumepb.RegisterVolumeServerServer(f.srv, f)
	go f.srv.Serve(ln)
	t.Cleanup(f.srv.Stop)
	return f
}

func (f *fakeVolumeServer) url() string { return "127.0.0.1:" + itoa(f.port) }

func (f *fakeVolumeServer) AllocateVolume(ctx context.Context, req *volumepb.AllocateVolumeRequest) (*volumepb.AllocateVolumeResponse, error) {
	f.mu.Lock()
	f.calls = append(f.calls, req)
	f.volumes = append(f.volumes, &masterpb.VolumeInfo{
		Id: req.VolumeId, Collection: req.Collection, Replication: req.Replication, Ttl: req.Ttl, Version: 3,
	})
	seq := f.seq
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
	return &volumepb.AllocateVolumeResponse{HeartbeatSequence: seq}, nil
}

func (f *fakeVolumeServer) allocations() []uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []uint32
	for _, c := range f.calls {
		ids = append(ids, c.VolumeId)
	}
	return ids
}

func (f *fakeVolumeServer) state() *masterpb.HeartbeatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	vols := make([]*masterpb.VolumeInfo, len(f.volumes))
	copy(vols, f.volumes)
	f.seq++
	return &masterpb.HeartbeatRequest{
		Sequence: f.seq,
		Ip:       "127.0.0.1", Port: uint32(f.port), GrpcPort: uint32(f.grpcPort), DataCenter: f.dc, Rack: f.rack,
		Disks: []*masterpb.DiskInfo{{Dir: "/data", MaxVolumes: uint32(f.maxVolumes), Volumes: vols}},
	}
}

// connect opens the heartbeat stream to the master's gRPC address and waits
// until the master has answered the first heartbeat.
func (f *fakeVolumeServer) connect(masterGRPC string) {
	f.t.Helper()
	cc, err := grpc.NewClient(masterGRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := masterpb.NewMasterClient(cc).Heartbeat(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := stream.Send(f.state()); err != nil {
		f.t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		f.t.Fatal(err)
	}
	f.hbCancel = func() { cancel(); cc.Close() }
	f.hbDone, f.hbStream = make(chan struct{}), stream
	f.hbStop = make(chan struct{})
	stop := f.hbStop
	go func() { // drains replies
		for {
			if _, err := stream.Recv(); err != nil {
				return
			}
		}
	}()
	go func() {
		defer close(f.hbDone)
		t := time.NewTicker(f.pulse)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-stop:
				return
			case <-t.C:
			case <-f.changed:
			}
			if err := stream.Send(f.state()); err != nil {
				return
			}
		}
	}()
	f.t.Cleanup(func() { f.breakStream() })
}

// breakStream cuts the stream as a crash would.
func (f *fakeVolumeServer) breakStream() {
	if f.hbCancel != nil {
		f.hbCancel()
		<-f.hbDone
		f.hbCancel = nil
	}
}

// closeStream ends the stream cleanly, as a shutdown would.
func (f *fakeVolumeServer) closeStream() {
	if f.hbCancel == nil {
		return
	}
	close(f.hbStop)
	<-f.hbDone
	if err := f.hbStream.CloseSend(); err != nil {
		f.t.Error(err)
	}
	// The master ends its side after seeing the clean close.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	select {
	case <-f.hbStream.Context().Done():
	case <-ctx.Done():
	}
	f.hbCancel()
	f.hbCancel = nil
}

func itoa(n int) string { return strconv.Itoa(n) }
