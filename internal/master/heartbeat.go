package master

import (
	"errors"
	"io"
	"net"
	"strconv"
	"time"

	"google.golang.org/grpc"

	"github.com/kelpfs/kelp/internal/pb/masterpb"
	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/topology"
	"github.com/kelpfs/kelp/internal/ttl"
)

// Heartbeat keeps a volume server's state current. Every master accepts
// heartbeats, the followers too, so that their topology is warm when one of
// them is elected; each answer names the leader, and when the leader changes
// while a stream is open this master tells the volume server at once (without
// waiting for its next heartbeat), so that volume servers find a new leader
// within moments of its election.
//
// A clean end of the stream (the volume server shutting down) drops the node
// at once; a broken stream leaves it to the dead timeout, since the node may
// only have lost the connection or moved to another master. On a follower,
// the mirror (mirror.go) replaces what the node last said here with the
// leader's fresher view as soon as the stream is gone.
func (g *grpcService) Heartbeat(stream grpc.BidiStreamingServer[masterpb.HeartbeatRequest, masterpb.HeartbeatResponse]) error {
	s := g.s
	ctx := stream.Context()
	reqs := make(chan *masterpb.HeartbeatRequest)
	recvErr := make(chan error, 1)
	// The receiver ends when the stream does: returning from this handler
	// cancels ctx and fails Recv.
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case reqs <- req:
			case <-ctx.Done():
				return
			}
		}
	}()
	var url string
	var streamID uint64
	defer func() {
		if url != "" {
			s.streams.release(url, streamID)
		}
	}()
	told := "" // the leader named in the last answer
	// Taken before any answer and renewed only after it fires, so that a
	// change between computing an answer and waiting is never missed.
	leaderChanged := s.cons.LeaderChanged()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-recvErr:
			if url != "" && errors.Is(err, io.EOF) && s.streams.release(url, streamID) {
				s.topo.RemoveNode(url)
				s.log.Info("volume server left", "node", url)
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case req := <-reqs:
			info := nodeInfoFromPB(req)
			if info.URL != url {
				if url != "" {
					s.streams.release(url, streamID)
				}
				url = info.URL
				streamID = s.streams.register(url)
				s.log.Info("volume server connected", "node", url, "dataCenter", info.DataCenter, "rack", info.Rack, "leader", s.cons.IsLeader())
			}
			maxVID := s.topo.UpdateNode(info, time.Now())
			s.noteVolumeIDs(ctx, maxVID)
			told = s.leader()
			if err := stream.Send(&masterpb.HeartbeatResponse{VolumeSizeLimit: s.currentSettings().VolumeSizeLimit, Leader: told}); err != nil {
				return err
			}
		case <-leaderChanged:
			leaderChanged = s.cons.LeaderChanged()
			// Only news the volume server should act on: another master
			// leads. Silence (no known leader) keeps it here, which is
			// better than sending it to a master that may be dead.
			leader := s.leader()
			if leader == "" || leader == told || leader == s.httpAddr {
				continue
			}
			told = leader
			if err := stream.Send(&masterpb.HeartbeatResponse{VolumeSizeLimit: s.currentSettings().VolumeSizeLimit, Leader: leader}); err != nil {
				return err
			}
		}
	}
}

func nodeInfoFromPB(req *masterpb.HeartbeatRequest) topology.NodeInfo {
	return topology.NodeInfo{
		URL:        net.JoinHostPort(req.GetIp(), strconv.Itoa(int(req.GetPort()))),
		PublicURL:  req.GetPublicUrl(),
		GRPCPort:   int(req.GetGrpcPort()),
		DataCenter: req.GetDataCenter(),
		Rack:       req.GetRack(),
		Disks:      disksFromPB(req.GetDisks()),
		Sequence:   req.GetSequence(),
	}
}

func disksFromPB(disks []*masterpb.DiskInfo) []topology.Disk {
	out := make([]topology.Disk, 0, len(disks))
	for _, d := range disks {
		disk := topology.Disk{Dir: d.GetDir(), MaxVolumes: int(d.GetMaxVolumes()), FreeBytes: d.GetFreeBytes()}
		for _, v := range d.GetVolumes() {
			// A volume with an unreadable code or TTL is still recorded so
			// that lookups work; it lands in the default layout.
			code, _ := replication.Parse(v.GetReplication())
			t, _ := ttl.Parse(v.GetTtl())
			vol := topology.Volume{
				ID: v.GetId(), Collection: v.GetCollection(), Replication: code, TTL: t,
				Size: v.GetSize(), FileCount: v.GetFileCount(), DeleteCount: v.GetDeleteCount(),
				DeletedBytes: v.GetDeletedBytes(), ReadOnly: v.GetReadOnly(), Version: v.GetVersion(),
			}
			if m := v.GetModifiedAtUnix(); m != 0 {
				vol.ModifiedAt = time.Unix(int64(m), 0).UTC()
			}
			disk.Volumes = append(disk.Volumes, vol)
		}
		for _, e := range d.GetEcShards() {
			disk.EcShards = append(disk.EcShards, topology.EcShards{
				ID: e.GetId(), Collection: e.GetCollection(), Scheme: e.GetScheme(), Shards: e.GetShards(),
				ShardSize: e.GetShardSize(), FileCount: e.GetFileCount(), DeleteCount: e.GetDeleteCount(),
			})
		}
		out = append(out, disk)
	}
	return out
}

func disksToPB(disks []topology.Disk) []*masterpb.DiskInfo {
	out := make([]*masterpb.DiskInfo, 0, len(disks))
	for _, d := range disks {
		di := &masterpb.DiskInfo{Dir: d.Dir, MaxVolumes: uint32(d.MaxVolumes), FreeBytes: d.FreeBytes}
		for _, v := range d.Volumes {
			vi := &masterpb.VolumeInfo{
				Id: v.ID, Collection: v.Collection, Replication: v.Replication.String(), Ttl: v.TTL.String(),
				Size: v.Size, FileCount: v.FileCount, DeleteCount: v.DeleteCount, DeletedBytes: v.DeletedBytes,
				ReadOnly: v.ReadOnly, Version: v.Version,
			}
			if !v.ModifiedAt.IsZero() {
				vi.ModifiedAtUnix = uint64(v.ModifiedAt.Unix())
			}
			di.Volumes = append(di.Volumes, vi)
		}
		for _, e := range d.EcShards {
			di.EcShards = append(di.EcShards, &masterpb.EcShardInfo{
				Id: e.ID, Collection: e.Collection, Scheme: e.Scheme, Shards: e.Shards,
				ShardSize: e.ShardSize, FileCount: e.FileCount, DeleteCount: e.DeleteCount,
			})
		}
		out = append(out, di)
	}
	return out
}
