package volumeserver

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/pb"
	"github.com/kelpfs/kelp/internal/pb/masterpb"
)

// heartbeatLoop keeps one heartbeat stream open to the leading master, moving to
// the next master on failure and to the leader the master names.
func (s *Server) heartbeatLoop(ctx context.Context) {
	if len(s.cfg.Masters) == 0 {
		s.log.Warn("no master configured; running without heartbeats")
		return
	}
	next := 0
	target := s.cfg.Masters[0]
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		leader, answered, err := s.heartbeatTo(ctx, target)
		if answered {
			// A master that answered was a working connection: the
			// next failure starts a fresh round of quick retries.
			backoff = 200 * time.Millisecond
		}
		switch {
		case ctx.Err() != nil:
			return
		case leader != "" && leader != target:
			s.log.Info("following master leader", "leader", leader)
			target = leader
			backoff = 200 * time.Millisecond
			continue
		case err != nil:
			s.log.Warn("heartbeat to master failed", "master", target, "err", err)
			s.hbLost.Store(true)
		}
		next = (next + 1) % len(s.cfg.Masters)
		target = s.cfg.Masters[next]
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// closeWait bounds how long a volume server shutting down waits for the
// master to acknowledge the end of its heartbeat stream.
const closeWait = time.Second

// heartbeatTo streams state to one master until the stream fails, the master
// says another one leads (returned as leader) or it has known no leader for
// too long. answered says whether the master answered at all.
func (s *Server) heartbeatTo(ctx context.Context, master string) (leader string, answered bool, err error) {
	addr, err := pb.GRPCAddress(master)
	if err != nil {
		return "", false, err
	}
	opts := pb.DialOptions()
	if dial := s.cfg.MasterDial; dial != nil {
		opts = append(opts, pb.WithDialer(dial))
	}
	if s.cfg.Signer.Enabled() {
		opts = append(opts, auth.DialOption(s.cfg.Signer.ServerToken))
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return "", false, err
	}
	defer conn.Close()
	// The stream outlives ctx by a moment: a server that stops ends it
	// first (CloseSend, below), and a cancelled stream is what the master
	// sees of a killed server. Should the end not get through, the stream
	// is cancelled all the same.
	parent := ctx
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	defer cancel()
	defer context.AfterFunc(parent, func() { time.AfterFunc(2*closeWait, cancel) })()
	stream, err := masterpb.NewMasterClient(conn).Heartbeat(ctx)
	if err != nil {
		return "", false, err
	}
	replies := make(chan *masterpb.HeartbeatResponse, 1)
	recvErr := make(chan error, 1)
	go func() {
		for {
			resp, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case replies <- resp:
			case <-ctx.Done():
				return
			}
		}
	}()
	s.mu.Lock()
	s.master = master
	s.mu.Unlock()
	ticker := time.NewTicker(s.cfg.PulseInterval)
	defer ticker.Stop()
	// The master answers every heartbeat. A master that stops answering is
	// dead or cut off even if the connection looks open: move on.
	//
	// A master that answers but has known no leader for as long is cut
	// off from the other masters (or they have all gone): a leader may
	// well be elected on the other side, and it hears from this server
	// only if the server goes looking for it. Staying would leave the
	// server out of every assign until the partition heals.
	lastReply, lastLed := time.Now(), time.Now()
	for {
		if silent := time.Since(lastReply); silent > 3*s.cfg.PulseInterval {
			return "", answered, fmt.Errorf("master %s silent for %v", master, silent.Round(time.Second))
		}
		if leaderless := time.Since(lastLed); leaderless > 3*s.cfg.PulseInterval {
			return "", answered, fmt.Errorf("master %s has known no leader for %v", master, leaderless.Round(100*time.Millisecond))
		}
		if err := stream.Send(s.heartbeat()); err != nil {
			return "", answered, err
		}
		// Wait for the next reason to send; answers arrive in between and must
		// be read, or the receiving goroutine blocks and a dead master goes
		// unnoticed until the next pulse.
	wait:
		for {
			select {
			case <-parent.Done():
				if !s.crashed.Load() {
					// A clean end: the master drops this server at
					// once. It must see the end before the cancel that
					// follows (the deferred one), which it would take
					// for a break (a killed server's): so wait for it
					// to close its side, briefly. A crash leaves the
					// stream to break.
					if stream.CloseSend() == nil {
						timeout := time.After(closeWait)
					closing:
						for {
							select {
							case <-recvErr:
								break closing
							case <-replies: // keep the receiver going
							case <-timeout:
								break closing
							}
						}
					}
				}
				return "", answered, parent.Err()
			case err := <-recvErr:
				return "", answered, err
			case resp := <-replies:
				answered = true
				lastReply = time.Now()
				if resp.Leader != "" {
					lastLed = lastReply
				}
				s.lastHeartbeat.Store(lastReply.UnixNano())
				if s.hbLost.Swap(false) {
					// Back after a break: deletes may have been made without
					// this server (ecjournal.go).
					s.markECStale()
				}
				if resp.VolumeSizeLimit > 0 {
					s.store.SetVolumeSizeLimit(int64(resp.VolumeSizeLimit))
				}
				if resp.Leader != "" && resp.Leader != master {
					return resp.Leader, answered, nil
				}
			case <-ticker.C:
				break wait
			case <-s.changed:
				break wait
			}
		}
	}
}

// heartbeat is this server's full state as the master wants it. The
// sequence is taken before the state is read, so that a volume allocated
// before a sequence number was handed out (see AllocateVolume) is in every
// heartbeat numbered above it.
func (s *Server) heartbeat() *masterpb.HeartbeatRequest {
	hb := &masterpb.HeartbeatRequest{
		Sequence:   s.heartbeatSeq.Add(1),
		Ip:         s.cfg.IP,
		Port:       uint32(s.cfg.Port),
		GrpcPort:   uint32(s.cfg.GRPCPort),
		PublicUrl:  s.cfg.PublicURL,
		DataCenter: s.cfg.DataCenter,
		Rack:       s.cfg.Rack,
	}
	for _, d := range s.store.Status() {
		disk := &masterpb.DiskInfo{Dir: d.Dir, MaxVolumes: uint32(d.MaxVolumes), FreeBytes: d.FreeBytes}
		for _, v := range d.Volumes {
			disk.Volumes = append(disk.Volumes, &masterpb.VolumeInfo{
				Id:           v.ID,
				Collection:   v.Collection,
				Replication:  v.Replication.String(),
				Ttl:          v.TTL.String(),
				Size:         uint64(v.Size),
				FileCount:    uint64(v.FileCount),
				DeleteCount:  uint64(v.DeleteCount),
				DeletedBytes: uint64(v.DeletedBytes),
				// A full volume (a write found less room left than it needed)
				// is read-only to the master: its size may be a few bytes under
				// the limit, which alone would leave it writable in the master's
				// view while it refuses nearly every write.
				ReadOnly:       v.ReadOnly || v.Full,
				Version:        uint32(v.Version),
				ModifiedAtUnix: uint64(v.ModifiedAt.Unix()),
			})
		}
		for _, e := range d.EcShards {
			disk.EcShards = append(disk.EcShards, &masterpb.EcShardInfo{
				Id: e.ID, Collection: e.Collection, Scheme: e.Scheme.String(), Shards: uint32(e.Shards),
				ShardSize: uint64(e.ShardSize), FileCount: uint64(e.FileCount), DeleteCount: uint64(e.DeleteCount),
			})
		}
		hb.Disks = append(hb.Disks, disk)
	}
	return hb
}
