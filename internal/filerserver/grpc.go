package filerserver

import (
	"context"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/filer"
	"github.com/kelpfs/kelp/internal/filer/store"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// grpcServer implements filerpb.FilerServer over the Server's filer.
type grpcServer struct {
	filerpb.UnimplementedFilerServer
	s *Server
}

func (g *grpcServer) err(op string, err error) error { return grpcError(g.s.log, op, err) }

func (g *grpcServer) LookupEntry(ctx context.Context, req *filerpb.LookupEntryRequest) (*filerpb.LookupEntryResponse, error) {
	e, err := g.s.filer.FindEntry(ctx, req.Path)
	if err != nil {
		return nil, g.err("lookup", err)
	}
	return &filerpb.LookupEntryResponse{Entry: toPB(e)}, nil
}

func (g *grpcServer) ListEntries(req *filerpb.ListEntriesRequest, stream filerpb.Filer_ListEntriesServer) error {
	entries, more, err := g.s.filer.ListEntries(stream.Context(), req.Dir, filer.ListOptions{
		StartAfter: req.StartAfter, Prefix: req.Prefix, Limit: int(req.Limit),
	})
	if err != nil {
		return g.err("list", err)
	}
	for i, e := range entries {
		if err := stream.Send(&filerpb.ListEntriesResponse{Entry: toPB(e), More: more && i == len(entries)-1}); err != nil {
			return err
		}
	}
	return nil
}

func (g *grpcServer) CreateEntry(ctx context.Context, req *filerpb.CreateEntryRequest) (*filerpb.CreateEntryResponse, error) {
	if req.DeferredDurability {
		ctx = store.WithDeferredDurability(ctx)
	}
	if err := checkKeys(req.Entry); err != nil {
		return nil, err
	}
	err := g.s.filer.CreateEntry(ctx, fromPB(req.Entry), filer.CreateOptions{Exclusive: req.Exclusive, NoParents: req.NoParents})
	if err != nil {
		return nil, g.err("create", err)
	}
	return &filerpb.CreateEntryResponse{}, nil
}

func (g *grpcServer) UpdateEntry(ctx context.Context, req *filerpb.UpdateEntryRequest) (*filerpb.UpdateEntryResponse, error) {
	if req.DeferredDurability {
		ctx = store.WithDeferredDurability(ctx)
	}
	if err := checkKeys(req.Entry); err != nil {
		return nil, err
	}
	if req.AttributesOnly {
		if err := g.s.filer.SetAttributes(ctx, fromPB(req.Entry), timeOf(req.IfCtimeNs)); err != nil {
			return nil, g.err("update", err)
		}
		return &filerpb.UpdateEntryResponse{}, nil
	}
	if req.IfCtimeNs != 0 {
		return nil, status.Error(codes.InvalidArgument, "if_ctime_ns needs attributes_only")
	}
	if err := g.s.filer.UpdateEntry(ctx, fromPB(req.Entry)); err != nil {
		return nil, g.err("update", err)
	}
	return &filerpb.UpdateEntryResponse{}, nil
}

// Sync waits until every change committed so far, deferred ones included,
// is durable in the filer's store.
func (g *grpcServer) Sync(ctx context.Context, req *filerpb.SyncRequest) (*filerpb.SyncResponse, error) {
	if err := g.s.filer.Sync(ctx); err != nil {
		return nil, g.err("sync", err)
	}
	return &filerpb.SyncResponse{}, nil
}

func (g *grpcServer) DeleteEntry(ctx context.Context, req *filerpb.DeleteEntryRequest) (*filerpb.DeleteEntryResponse, error) {
	if err := g.s.filer.DeleteEntry(ctx, req.Path, req.Recursive); err != nil {
		return nil, g.err("delete", err)
	}
	return &filerpb.DeleteEntryResponse{}, nil
}

func (g *grpcServer) Rename(ctx context.Context, req *filerpb.RenameRequest) (*filerpb.RenameResponse, error) {
	if err := g.s.filer.Rename(ctx, req.From, req.To); err != nil {
		return nil, g.err("rename", err)
	}
	return &filerpb.RenameResponse{}, nil
}

func (g *grpcServer) AssignVolume(ctx context.Context, req *filerpb.AssignVolumeRequest) (*filerpb.AssignVolumeResponse, error) {
	if g.s.client == nil {
		return nil, status.Error(codes.Unavailable, "filer: no master configured")
	}
	col, repl := req.Collection, req.Replication
	if col == "" {
		col = g.s.cfg.Collection
	}
	if repl == "" {
		repl = g.s.cfg.Replication
	}
	a, err := g.s.client.Assign(ctx, client.AssignRequest{Count: req.Count, Collection: col, Replication: repl, TTL: req.Ttl, DataCenter: req.DataCenter})
	if err != nil {
		g.s.log.Warn("filer: assign for a gateway failed", "err", err)
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return &filerpb.AssignVolumeResponse{Fid: a.FID.String(), Url: a.URL, PublicUrl: a.PublicURL, Count: a.Count, Auth: a.Auth}, nil
}

func (g *grpcServer) SubscribeMetadata(req *filerpb.SubscribeMetadataRequest, stream filerpb.Filer_SubscribeMetadataServer) error {
	at := g.s.subs.add()
	defer g.s.subs.remove(at)
	at.Store(req.SinceSeq)
	err := g.s.filer.Subscribe(stream.Context(), req.SinceSeq, func(ev *filer.Event) error {
		if err := stream.Send(eventToPB(ev)); err != nil {
			return err
		}
		at.Store(ev.Seq)
		g.s.subs.sent.Add(1)
		return nil
	})
	if stream.Context().Err() != nil {
		return nil // the client went away or the server is stopping
	}
	return g.err("subscribe", err)
}

func (g *grpcServer) GetConfiguration(ctx context.Context, req *filerpb.GetConfigurationRequest) (*filerpb.GetConfigurationResponse, error) {
	seq, err := g.s.filer.LastSeq(ctx)
	if err != nil {
		return nil, g.err("configuration", err)
	}
	return &filerpb.GetConfigurationResponse{
		Masters:     g.s.cfg.Masters,
		ChunkSize:   int64(g.s.filer.ChunkSize()),
		Collection:  g.s.cfg.Collection,
		Replication: g.s.cfg.Replication,
		LastSeq:     seq,
		EncryptData: g.s.filer.EncryptData(),
	}, nil
}

// checkKeys refuses chunk keys of the wrong size: stored, they would make
// the entry undecodable.
func checkKeys(e *filerpb.Entry) error {
	for _, c := range e.GetChunks() {
		if n := len(c.CipherKey); n != 0 && n != chunk.KeySize {
			return status.Errorf(codes.InvalidArgument, "chunk %s: cipher key of %d bytes, want %d", c.Fid, n, chunk.KeySize)
		}
	}
	return nil
}
