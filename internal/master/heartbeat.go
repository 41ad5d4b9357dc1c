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
// at once. A broken one (a killed process: its kernel closes the connection,
// so the break is seen at once; a cut connection; the node moving to another
// master) marks it unreachable at once (topology.HeartbeatLost): no assign
// names it and its copies count as missing, so that writes stop going to a
// server that is probably gone, while the node itself stays until the dead
// timeout, since it may only have lost the connection. Its next heartbeat,
// here or (on a follower) through the mirror, clears the mark. On a
// follower, the mirror (mirror.go) replaces what the node last said here with
// the leader's fresher view as soon as the stream is gone.
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
	var ended error // why the stream ended; io.EOF: cleanly
	defer func() {
		if url != "" {
			s.streamEnded(url, streamID, ended)
		}
	}()
	told := "" // the leader named in the last answer
	// Taken before any answer and renewed only after it fires, so that a
	// change between computing an answer and waiting is never missed.
	leaderChanged := s.cons.LeaderChanged()
	for {
		select {
		case <-ctx.Done():
			// A volume server that shuts down ends the stream and then
			// cancels it at once: both may be ready here, and an end
			// received before the cancel is a clean one.
			ended = ctx.Err()
			select {
			case err := <-recvErr:
				ended = err
			case <-time.After(streamEndGrace):
			}
			return ctx.Err()
		case err := <-recvErr:
			ended = err
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
				ended = err
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
				ended = err
				return err
			}
		}
	}
}

// streamEndGrace is how long a cancelled heartbeat stream waits for its
// receiver to say whether the stream had ended cleanly first.
const streamEndGrace = 100 * time.Millisecond

// streamEnded handles the end of a node's heartbeat stream (see Heartbeat):
// nothing if the node opened a newer one meanwhile or this master is
// shutting down; the node dropped if the stream ended cleanly; marked
// unreachable at once if it broke.
func (s *Server) streamEnded(url string, streamID uint64, why error) {
	if !s.streams.release(url, streamID) || s.ctx.Err() != nil {
		return
	}
	if errors.Is(why, io.EOF) {
		if s.topo.RemoveNode(url) {
			s.log.Info("volume server left", "node", url)
		}
		return
	}
	cause := ""
	if why != nil {
		cause = why.Error()
	}
	if s.topo.HeartbeatLost(url, cause, time.Now()) {
		s.log.Warn("volume server's heartbeat stream broke; no assign names it until it is heard from again", "node", url, "err", why)
	}
	if s.streams.has(url) {
		// It reconnected between the release and the mark, and its
		// first heartbeat may have come before the mark: that stream's
		// next heartbeat clears it too, but there is no need to wait.
		s.topo.ClearHeartbeatLost(url)
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
