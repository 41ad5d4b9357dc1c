package shell

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/pb/masterpb"
	"github.com/kelpfs/kelp/internal/pb/volumepb"
)

// fakeCluster is an in-memory master and volume servers speaking the real
// gRPC APIs on loopback, so shell sessions run end to end without the
// master's or volume servers' implementations.
type fakeCluster struct {
	t      *testing.T
	master *fakeMaster
	addr   string // what -master gets: host:httpPort.grpcPort

	mu      sync.Mutex
	servers []*fakeVolume
}

type fakeVol struct {
	id          uint32
	collection  string
	replication string
	size, files uint64
	readOnly    bool
}

func startFake(t *testing.T) *fakeCluster {
	c := &fakeCluster{t: t}
	c.master = &fakeMaster{c: c, defaultRepl: "000", collRepl: map[string]string{}}
	port := serveGRPC(t, func(s *grpc.Server) { masterpb.RegisterMasterServer(s, c.master) })
	c.addr = fmt.Sprintf("127.0.0.1:1.%d", port)
	return c
}

func serveGRPC(t *testing.T, register func(*grpc.Server)) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	register(s)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return ln.Addr().(*net.TCPAddr).Port
}

// addServer starts a fake volume server; its URL is 127.0.0.1:<grpc port>.
func (c *fakeCluster) addServer(dc, rack string, maxVolumes int) *fakeVolume {
	v := &fakeVolume{c: c, dc: dc, rack: rack, max: maxVolumes, vols: map[uint32]*fakeVol{}}
	v.port = serveGRPC(c.t, func(s *grpc.Server) { volumepb.RegisterVolumeServerServer(s, v) })
	v.url = "127.0.0.1:" + strconv.Itoa(v.port)
	c.mu.Lock()
	c.servers = append(c.servers, v)
	c.mu.Unlock()
	return v
}

func (c *fakeCluster) byGRPC(addr string) *fakeVolume {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.servers {
		if "127.0.0.1:"+strconv.Itoa(v.port) == addr {
			return v
		}
	}
	return nil
}

type fakeMaster struct {
	masterpb.UnimplementedMasterServer
	c *fakeCluster

	mu          sync.Mutex
	token       uint64
	owner       string
	expires     time.Time
	renewals    int
	releases    int
	topoCalls   int
	defaultRepl string
	collRepl    map[string]string
	configured  []*masterpb.ConfigureRequest
}

func (m *fakeMaster) LeaseAdminLock(ctx context.Context, req *masterpb.LeaseAdminLockRequest) (*masterpb.LeaseAdminLockResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	lease := time.Duration(req.GetLeaseMs()) * time.Millisecond
	if lease == 0 {
		lease = 30 * time.Second
	}
	now := time.Now()
	switch {
	case req.GetPreviousToken() != 0:
		if req.GetPreviousToken() != m.token || now.After(m.expires) {
			return nil, status.Error(codes.FailedPrecondition, "fake: lock token is not the holder's")
		}
		m.renewals++
	case m.token != 0 && now.Before(m.expires):
		return nil, status.Errorf(codes.FailedPrecondition, "fake: admin lock held by %q", m.owner)
	default:
		m.token++
		m.owner = req.GetOwner()
	}
	m.expires = now.Add(lease)
	return &masterpb.LeaseAdminLockResponse{Token: m.token, ExpiresUnixMs: m.expires.UnixMilli()}, nil
}

func (m *fakeMaster) ReleaseAdminLock(ctx context.Context, req *masterpb.ReleaseAdminLockRequest) (*masterpb.ReleaseAdminLockResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if req.GetToken() == m.token {
		m.expires = time.Time{}
		m.releases++
	}
	return &masterpb.ReleaseAdminLockResponse{}, nil
}

// revoke makes the current holder's token invalid, as if another shell took
// the lock after a lease ran out.
func (m *fakeMaster) revoke() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.token++
	m.owner = "someone else"
	m.expires = time.Now().Add(time.Minute)
}

func (m *fakeMaster) Configure(ctx context.Context, req *masterpb.ConfigureRequest) (*masterpb.ConfigureResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if req.GetLockToken() != m.token || time.Now().After(m.expires) {
		return nil, status.Error(codes.FailedPrecondition, "fake: admin lock not held")
	}
	m.configured = append(m.configured, req)
	if req.GetCollection() == "" {
		m.defaultRepl = req.GetReplication()
	} else {
		m.collRepl[req.GetCollection()] = req.GetReplication()
	}
	return &masterpb.ConfigureResponse{DefaultReplication: m.defaultRepl, CollectionReplication: m.collRepl}, nil
}

func (m *fakeMaster) ClusterStatus(ctx context.Context, _ *masterpb.ClusterStatusRequest) (*masterpb.ClusterStatusResponse, error) {
	b, _ := json.Marshal(map[string]any{"leader": "127.0.0.1:1", "masters": []map[string]string{{"address": "127.0.0.1:1", "role": "leader"}}})
	return &masterpb.ClusterStatusResponse{Json: b}, nil
}

func (m *fakeMaster) Topology(ctx context.Context, _ *masterpb.TopologyRequest) (*masterpb.TopologyResponse, error) {
	m.mu.Lock()
	m.topoCalls++
	resp := &masterpb.TopologyResponse{VolumeSizeLimit: 30 << 20, DefaultReplication: m.defaultRepl, CollectionReplication: m.collRepl}
	m.mu.Unlock()
	m.c.mu.Lock()
	servers := slices.Clone(m.c.servers)
	m.c.mu.Unlock()
	dcs := map[string]*masterpb.DataCenter{}
	var order []string
	for _, v := range servers {
		dc := dcs[v.dc]
		if dc == nil {
			dc = &masterpb.DataCenter{Id: v.dc}
			dcs[v.dc] = dc
			order = append(order, v.dc)
		}
		i := slices.IndexFunc(dc.Racks, func(r *masterpb.Rack) bool { return r.Id == v.rack })
		if i < 0 {
			dc.Racks = append(dc.Racks, &masterpb.Rack{Id: v.rack})
			i = len(dc.Racks) - 1
		}
		dc.Racks[i].Nodes = append(dc.Racks[i].Nodes, v.node())
	}
	slices.Sort(order)
	for _, name := range order {
		resp.DataCenters = append(resp.DataCenters, dcs[name])
	}
	return resp, nil
}

type fakeVolume struct {
	volumepb.UnimplementedVolumeServerServer
	c        *fakeCluster
	dc, rack string
	url      string
	port     int
	max      int

	mu   sync.Mutex
	vols map[uint32]*fakeVol
	// blockCopy makes CopyVolume send one progress message and then wait for
	// its context to end, to test interruption.
	blockCopy bool
	calls     []string
}

func (v *fakeVolume) node() *masterpb.Node {
	v.mu.Lock()
	defer v.mu.Unlock()
	d := &masterpb.DiskInfo{Dir: "/data/" + v.url, MaxVolumes: uint32(v.max), FreeBytes: 1 << 30}
	for _, id := range slices.Sorted(mapsKeys(v.vols)) {
		fv := v.vols[id]
		d.Volumes = append(d.Volumes, &masterpb.VolumeInfo{Id: id, Collection: fv.collection, Replication: fv.replication, Size: fv.size, FileCount: fv.files, ReadOnly: fv.readOnly})
	}
	return &masterpb.Node{Url: v.url, GrpcPort: uint32(v.port), Disks: []*masterpb.DiskInfo{d}}
}

func mapsKeys(m map[uint32]*fakeVol) func(func(uint32) bool) {
	return func(yield func(uint32) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (v *fakeVolume) put(fv fakeVol) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.vols[fv.id] = &fv
}

func (v *fakeVolume) get(id uint32) (fakeVol, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	fv, ok := v.vols[id]
	if !ok {
		return fakeVol{}, false
	}
	return *fv, true
}

func (v *fakeVolume) record(call string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.calls = append(v.calls, call)
}

func (v *fakeVolume) vol(id uint32) (*fakeVol, error) {
	fv := v.vols[id]
	if fv == nil {
		return nil, status.Errorf(codes.NotFound, "fake: volume %d not found", id)
	}
	return fv, nil
}

func (v *fakeVolume) DeleteVolume(ctx context.Context, req *volumepb.DeleteVolumeRequest) (*volumepb.DeleteVolumeResponse, error) {
	v.record(fmt.Sprintf("delete %d", req.GetVolumeId()))
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, err := v.vol(req.GetVolumeId()); err != nil {
		return nil, err
	}
	delete(v.vols, req.GetVolumeId())
	return &volumepb.DeleteVolumeResponse{}, nil
}

func (v *fakeVolume) MarkVolume(ctx context.Context, req *volumepb.MarkVolumeRequest) (*volumepb.MarkVolumeResponse, error) {
	v.record(fmt.Sprintf("mark %d ro=%v", req.GetVolumeId(), req.GetReadOnly()))
	v.mu.Lock()
	defer v.mu.Unlock()
	fv, err := v.vol(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	fv.readOnly = req.GetReadOnly()
	return &volumepb.MarkVolumeResponse{}, nil
}

func (v *fakeVolume) ConfigureVolume(ctx context.Context, req *volumepb.ConfigureVolumeRequest) (*volumepb.ConfigureVolumeResponse, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	fv, err := v.vol(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	fv.replication = req.GetReplication()
	return &volumepb.ConfigureVolumeResponse{}, nil
}

func (v *fakeVolume) VolumeStatus(ctx context.Context, req *volumepb.VolumeStatusRequest) (*volumepb.VolumeStatusResponse, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	fv, err := v.vol(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	return &volumepb.VolumeStatusResponse{Size: fv.size, FileCount: fv.files, ReadOnly: fv.readOnly}, nil
}

func (v *fakeVolume) VacuumVolume(ctx context.Context, req *volumepb.VacuumVolumeRequest) (*volumepb.VacuumVolumeResponse, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	fv, err := v.vol(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	const ratio = 0.5
	if ratio < req.GetGarbageThreshold() {
		return &volumepb.VacuumVolumeResponse{GarbageRatioBefore: ratio}, nil
	}
	before := fv.size
	fv.size /= 2
	return &volumepb.VacuumVolumeResponse{Vacuumed: true, GarbageRatioBefore: ratio, SizeBefore: before, SizeAfter: fv.size}, nil
}

// CopyVolume pulls the volume's record from the source fake, refusing a
// writable source: the shell must mark it read-only first.
func (v *fakeVolume) CopyVolume(req *volumepb.CopyVolumeRequest, stream grpc.ServerStreamingServer[volumepb.CopyVolumeProgress]) error {
	v.record(fmt.Sprintf("copy %d from %s", req.GetVolumeId(), req.GetSourceGrpcAddr()))
	src := v.c.byGRPC(req.GetSourceGrpcAddr())
	if src == nil {
		return status.Errorf(codes.Unavailable, "fake: no source %s", req.GetSourceGrpcAddr())
	}
	fv, ok := src.get(req.GetVolumeId())
	if !ok {
		return status.Errorf(codes.NotFound, "fake: source has no volume %d", req.GetVolumeId())
	}
	if !fv.readOnly {
		return status.Error(codes.FailedPrecondition, "fake: source is writable")
	}
	if err := stream.Send(&volumepb.CopyVolumeProgress{BytesCopied: fv.size / 2, BytesTotal: fv.size}); err != nil {
		return err
	}
	v.mu.Lock()
	block := v.blockCopy
	v.mu.Unlock()
	if block {
		<-stream.Context().Done()
		return stream.Context().Err()
	}
	v.put(fv)
	return stream.Send(&volumepb.CopyVolumeProgress{BytesCopied: fv.size, BytesTotal: fv.size, Done: true})
}
