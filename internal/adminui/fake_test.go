package adminui

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/kelpfs/kelp/internal/master"
	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/topology"
)

// fakeSource is an in-memory cluster: a real topology.Topology filled by
// hand, three masters, and a shell that records its scripts.
type fakeSource struct {
	topo  *topology.Topology
	infos []topology.NodeInfo // what each server last reported
	now   time.Time
	mu    sync.Mutex
	shell []string
}

// newFakeSource builds servers servers over 4 data centers and 10 racks
// each, holding volumes volumes of replication 001 (two copies each, on
// two servers of the same rack), one of five read-only, one of ten with
// half its bytes garbage.
func newFakeSource(servers, volumes int) *fakeSource {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f := &fakeSource{topo: topology.New(topology.Options{VolumeSizeLimit: 1 << 30}), now: now}
	perServer := make([][]topology.Volume, servers)
	code := replication.Must("001")
	for i := 0; i < volumes; i++ {
		v := topology.Volume{ID: uint32(i + 1), Collection: []string{"", "photos", "logs"}[i%3], Replication: code,
			Size: uint64(1+i%1000) << 20, FileCount: uint64(10 + i%500), ReadOnly: i%5 == 0}
		if i%10 == 0 {
			v.DeletedBytes = v.Size / 2
			v.DeleteCount = v.FileCount / 2
		}
		a := i % servers
		b := a ^ 1 // the neighbour, in the same rack
		perServer[a] = append(perServer[a], v)
		if b < servers && i%97 != 0 { // a few volumes miss their second copy
			perServer[b] = append(perServer[b], v)
		}
	}
	for s := 0; s < servers; s++ {
		info := topology.NodeInfo{
			URL: fmt.Sprintf("10.%d.%d.%d:8080", s/10000, (s/100)%100, s%100), DataCenter: fmt.Sprintf("dc%d", (s/2)%4),
			Rack: fmt.Sprintf("rack%d", (s/8)%10), GRPCPort: 18080,
			Disks: []topology.Disk{{Dir: "/data", MaxVolumes: max(8, len(perServer[s])+len(perServer[s])/4),
				FreeBytes: 500 << 30, Volumes: perServer[s]}},
		}
		seen := now
		if s == 3 {
			seen = now.Add(-time.Minute) // stopped heartbeating
		}
		f.topo.UpdateNode(info, seen)
		f.infos = append(f.infos, info)
	}
	return f
}

func (f *fakeSource) HTTPAddr() string { return "127.0.0.1:9333" }

func (f *fakeSource) ClusterStatus(ctx context.Context) master.ClusterStatus {
	return master.ClusterStatus{
		Self: "127.0.0.1:9333", Leader: "127.0.0.1:9334", VolumeSizeLimit: 1 << 30, DefaultReplication: "001",
		PulseSeconds: 5, MaxVolumeID: 7, VolumeServers: f.topo.Nodes(false),
		Peers: []master.PeerStatus{
			{Address: "127.0.0.1:9333", Role: "follower", Term: 3, AppliedIndex: 40, LastContact: f.now.Add(-time.Second)},
			{Address: "127.0.0.1:9334", Role: "leader", Term: 3, AppliedIndex: 40},
			{Address: "127.0.0.1:9335", Role: "unreachable", Error: "connection refused"},
		},
	}
}

func (f *fakeSource) TopologyStatus() topology.Status      { return f.topo.Status() }
func (f *fakeSource) EcVolumes() []topology.EcVolumeStatus { return f.topo.EcStatus() }
func (f *fakeSource) PulseSeconds() float64                { return 5 }

func (f *fakeSource) RunShell(ctx context.Context, owner string, out io.Writer, script string) error {
	f.mu.Lock()
	f.shell = append(f.shell, script)
	f.mu.Unlock()
	fmt.Fprintf(out, "ran %q as %s\nplan: move volume 1 from a to b\n", script, owner)
	return nil
}

func (f *fakeSource) scripts() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.shell...)
}

func (f *fakeSource) GrowVolumes(ctx context.Context, collection, replication string) ([]uint32, error) {
	f.mu.Lock()
	f.shell = append(f.shell, "grow "+collection+" "+replication)
	f.mu.Unlock()
	return []uint32{8}, nil
}
