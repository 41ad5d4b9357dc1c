package shell

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/kelpfs/kelp/internal/pb"
	"github.com/kelpfs/kelp/internal/pb/masterpb"
	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/topology"
	"github.com/kelpfs/kelp/internal/ttl"
)

// view is one Topology answer and indexes over it. Executors update copies
// as they add and delete them, so later steps see the current state.
type view struct {
	resp  *masterpb.TopologyResponse
	nodes map[string]*masterpb.Node // by URL
	dcOf  map[string][2]string      // URL -> data center, rack
	// copies: volume id -> node URL -> the copy's info.
	copies map[uint32]map[string]*masterpb.VolumeInfo
}

func (s *Shell) fetchView(ctx context.Context) (*view, error) {
	var resp *masterpb.TopologyResponse
	err := s.conns.master(ctx, func(m masterpb.MasterClient) (err error) {
		resp, err = m.Topology(ctx, &masterpb.TopologyRequest{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("shell: read topology: %w", err)
	}
	v := &view{resp: resp, nodes: map[string]*masterpb.Node{}, dcOf: map[string][2]string{}, copies: map[uint32]map[string]*masterpb.VolumeInfo{}}
	for _, dc := range resp.GetDataCenters() {
		for _, rack := range dc.GetRacks() {
			for _, n := range rack.GetNodes() {
				v.nodes[n.GetUrl()] = n
				v.dcOf[n.GetUrl()] = [2]string{dc.GetId(), rack.GetId()}
				for _, d := range n.GetDisks() {
					for _, vol := range d.GetVolumes() {
						v.addCopy(vol.GetId(), n.GetUrl(), vol)
					}
				}
			}
		}
	}
	return v, nil
}

func (v *view) addCopy(id uint32, url string, info *masterpb.VolumeInfo) {
	if v.copies[id] == nil {
		v.copies[id] = map[string]*masterpb.VolumeInfo{}
	}
	v.copies[id][url] = info
}

func (v *view) removeCopy(id uint32, url string) {
	delete(v.copies[id], url)
	if len(v.copies[id]) == 0 {
		delete(v.copies, id)
	}
}

// holders lists the nodes holding volume id, sorted.
func (v *view) holders(id uint32) []string {
	var out []string
	for u := range v.copies[id] {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

// anyCopy returns the info of one copy of volume id (the first by URL).
func (v *view) anyCopy(id uint32) *masterpb.VolumeInfo {
	h := v.holders(id)
	if len(h) == 0 {
		return nil
	}
	return v.copies[id][h[0]]
}

func (v *view) volumeIDs() []uint32 {
	var ids []uint32
	for id := range v.copies {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// grpcAddr is where a node's admin API listens: the port it reported, else
// its HTTP port + 10000.
func (v *view) grpcAddr(url string) (string, error) {
	if n := v.nodes[url]; n != nil && n.GetGrpcPort() != 0 {
		host, _, err := net.SplitHostPort(url)
		if err != nil {
			return "", fmt.Errorf("shell: node %q: %w", url, err)
		}
		return net.JoinHostPort(host, strconv.Itoa(int(n.GetGrpcPort()))), nil
	}
	return pb.GRPCAddress(url)
}

// snapshot converts the view to the planners' model.
func (v *view) snapshot() []topology.NodeInfo {
	var out []topology.NodeInfo
	for _, dc := range v.resp.GetDataCenters() {
		for _, rack := range dc.GetRacks() {
			for _, n := range rack.GetNodes() {
				info := topology.NodeInfo{URL: n.GetUrl(), PublicURL: n.GetPublicUrl(), GRPCPort: int(n.GetGrpcPort()), DataCenter: dc.GetId(), Rack: rack.GetId()}
				for _, d := range n.GetDisks() {
					disk := topology.Disk{Dir: d.GetDir(), MaxVolumes: int(d.GetMaxVolumes()), FreeBytes: d.GetFreeBytes()}
					for _, vol := range d.GetVolumes() {
						disk.Volumes = append(disk.Volumes, volumeFromPB(vol))
					}
					info.Disks = append(info.Disks, disk)
				}
				out = append(out, info)
			}
		}
	}
	return out
}

func volumeFromPB(v *masterpb.VolumeInfo) topology.Volume {
	// An unreadable code or TTL counts as the default: the planners then
	// leave such a volume as it is rather than guess.
	code, _ := replication.Parse(v.GetReplication())
	t, _ := ttl.Parse(v.GetTtl())
	out := topology.Volume{
		ID: v.GetId(), Collection: v.GetCollection(), Replication: code, TTL: t, Size: v.GetSize(),
		FileCount: v.GetFileCount(), DeleteCount: v.GetDeleteCount(), DeletedBytes: v.GetDeletedBytes(),
		ReadOnly: v.GetReadOnly(), Version: v.GetVersion(),
	}
	if m := v.GetModifiedAtUnix(); m != 0 {
		out.ModifiedAt = time.Unix(int64(m), 0).UTC()
	}
	return out
}

// bytesString prints a byte count for people.
func bytesString(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// locations places nodes for topology.CheckPlacement.
func (v *view) locations(urls []string) []topology.Location {
	out := make([]topology.Location, len(urls))
	for i, u := range urls {
		out[i] = topology.Location{URL: u, DataCenter: v.dcOf[u][0], Rack: v.dcOf[u][1]}
	}
	return out
}
