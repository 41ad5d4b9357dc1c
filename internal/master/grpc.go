package master

import (
	"context"
	"encoding/json"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/pb/masterpb"
	"github.com/kelpfs/kelp/internal/topology"
)

// grpcService implements masterpb.MasterServer over Server.
type grpcService struct {
	masterpb.UnimplementedMasterServer
	s *Server
}

func grpcError(err error) error { return status.Error(grpcCode(err), err.Error()) }

func locationToPB(l topology.Location) *masterpb.Location {
	return &masterpb.Location{Url: l.URL, PublicUrl: l.PublicURL, DataCenter: l.DataCenter, Rack: l.Rack, GrpcPort: uint32(l.GRPCPort), EcShards: l.EcShards}
}

func (g *grpcService) Assign(ctx context.Context, req *masterpb.AssignRequest) (*masterpb.AssignResponse, error) {
	if resp, handled, err := forward(g.s, ctx, req, masterpb.MasterClient.Assign); handled {
		return resp, err
	}
	res, err := g.s.assign(ctx, assignRequest{
		Count: req.GetCount(), Collection: req.GetCollection(), Replication: req.GetReplication(),
		TTL: req.GetTtl(), DataCenter: req.GetDataCenter(),
	})
	if err != nil {
		return nil, grpcError(err)
	}
	resp := &masterpb.AssignResponse{
		Fid: res.FID.String(), Url: res.Locations[0].URL, PublicUrl: res.Locations[0].PublicURL, Count: res.Count,
		Auth: g.s.cfg.Signer.Sign(res.FID, res.Count),
	}
	for _, l := range res.Locations[1:] {
		resp.Replicas = append(resp.Replicas, locationToPB(l))
	}
	return resp, nil
}

// Lookup is answered by the leader; a follower forwards it, and answers from
// its own (mirrored) topology when no leader can be reached.
func (g *grpcService) Lookup(ctx context.Context, req *masterpb.LookupRequest) (*masterpb.LookupResponse, error) {
	if c, err := g.s.leaderClient(ctx); err == nil && c != nil {
		if resp, err := c.Lookup(g.s.forwardCtx(ctx), req); err == nil || status.Code(err) != codes.Unavailable {
			return resp, err
		}
	}
	resp := &masterpb.LookupResponse{}
	for _, vid := range req.GetVolumeIds() {
		vl := &masterpb.VolumeLocations{VolumeId: vid}
		locs, err := g.s.topo.Lookup(vid)
		if err != nil && !g.s.cons.IsLeader() {
			// A follower's view is a copy: not knowing a volume is not
			// proof that it does not exist.
			return nil, grpcError(g.s.notLeader())
		}
		if err != nil && !g.s.warm() {
			return nil, grpcError(errWarmingUp)
		}
		if err != nil {
			vl.Error = "volume " + strconv.FormatUint(uint64(vid), 10) + " not found"
		}
		vl.MinCopies = uint32(g.s.topo.VolumeMinCopies(vid))
		for _, l := range locs {
			vl.Locations = append(vl.Locations, locationToPB(l))
			if l.EcShards != 0 && vl.EcScheme == "" {
				if ec, ok := g.s.topo.LookupEC(vid); ok {
					vl.EcScheme = ec.Scheme
				}
			}
		}
		resp.Volumes = append(resp.Volumes, vl)
	}
	return resp, nil
}

func (g *grpcService) ClusterStatus(ctx context.Context, _ *masterpb.ClusterStatusRequest) (*masterpb.ClusterStatusResponse, error) {
	b, err := json.Marshal(g.s.clusterStatus(ctx))
	if err != nil {
		return nil, grpcError(err)
	}
	return &masterpb.ClusterStatusResponse{Json: b}, nil
}
