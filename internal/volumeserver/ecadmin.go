package volumeserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/erasure"
	"github.com/kelpfs/kelp/internal/pb/volumepb"
	"github.com/kelpfs/kelp/internal/store"
)

// progressSender reports progress on a stream at most every 200 ms.
func progressSender(send func(*volumepb.EcProgress) error) func(done, total int64) {
	last := time.Time{}
	return func(done, total int64) {
		if time.Since(last) < 200*time.Millisecond && done < total {
			return
		}
		last = time.Now()
		send(&volumepb.EcProgress{Done: uint64(done), Total: uint64(total)})
	}
}

func shardSet(ids []uint32) erasure.ShardSet {
	var s erasure.ShardSet
	for _, i := range ids {
		if i < erasure.MaxShards {
			s = s.With(int(i))
		}
	}
	return s
}

func shardIDs(s erasure.ShardSet) []uint32 {
	var out []uint32
	for _, i := range s.List() {
		out = append(out, uint32(i))
	}
	return out
}

func ecGRPCError(err error) error {
	switch {
	case errors.Is(err, store.ErrNotReadOnly), errors.Is(err, erasure.ErrBadScheme):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, erasure.ErrTooFewShards):
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	return grpcError(err)
}

func (a *adminServer) EcEncode(req *volumepb.EcEncodeRequest, stream volumepb.VolumeServer_EcEncodeServer) error {
	scheme := erasure.DefaultScheme
	if req.Scheme != "" {
		var err error
		if scheme, err = erasure.ParseScheme(req.Scheme); err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
	}
	if err := a.s.store.EcEncode(stream.Context(), req.VolumeId, scheme, progressSender(stream.Send)); err != nil {
		return ecGRPCError(err)
	}
	return stream.Send(&volumepb.EcProgress{Message: "encoded " + scheme.String()})
}

// fileSource streams a file of an EC volume from another server's ReadVolumeFile.
func (a *adminServer) fileSource(grpcAddr string, vid uint32) store.FileSource {
	return func(ctx context.Context, ext string, w io.Writer) error {
		conn, err := a.s.conns.Get(grpcAddr)
		if err != nil {
			return err
		}
		src, err := volumepb.NewVolumeServerClient(conn).ReadVolumeFile(ctx, &volumepb.ReadVolumeFileRequest{VolumeId: vid, Ext: ext})
		if err != nil {
			return err
		}
		var got, size uint64
		for first := true; ; first = false {
			msg, err := src.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			if first {
				size = msg.FileSize
			}
			if _, err := w.Write(msg.Data); err != nil {
				return err
			}
			got += uint64(len(msg.Data))
		}
		if got != size {
			return fmt.Errorf("copied %d of %d bytes of %s", got, size, ext)
		}
		return nil
	}
}

func (a *adminServer) EcCopy(req *volumepb.EcCopyRequest, stream volumepb.VolumeServer_EcCopyServer) error {
	shards := shardSet(req.ShardIds)
	if shards == 0 {
		return status.Error(codes.InvalidArgument, "no shard to copy")
	}
	err := a.s.store.EcImport(stream.Context(), req.VolumeId, req.Collection, shards, a.fileSource(req.SourceGrpcAddr, req.VolumeId))
	if err != nil {
		return ecGRPCError(err)
	}
	return stream.Send(&volumepb.EcProgress{Message: "copied shards " + shards.String()})
}

func (a *adminServer) EcMount(ctx context.Context, req *volumepb.EcShardsRequest) (*volumepb.EcShardsResponse, error) {
	if err := a.s.store.EcMount(req.VolumeId, req.Collection, shardSet(req.ShardIds)); err != nil {
		return nil, ecGRPCError(err)
	}
	return a.ecShardsHere(req.VolumeId), nil
}

func (a *adminServer) EcUnmount(ctx context.Context, req *volumepb.EcShardsRequest) (*volumepb.EcShardsResponse, error) {
	if err := a.s.store.EcUnmount(req.VolumeId, shardSet(req.ShardIds)); err != nil {
		return nil, ecGRPCError(err)
	}
	return a.ecShardsHere(req.VolumeId), nil
}

func (a *adminServer) EcVerify(ctx context.Context, req *volumepb.EcShardsRequest) (*volumepb.EcShardsResponse, error) {
	ev, ok := a.s.store.EcVolume(req.VolumeId)
	if !ok {
		return nil, status.Errorf(codes.NotFound, "EC volume %d not on %s", req.VolumeId, a.s.URL())
	}
	if err := ev.VerifyShards(shardSet(req.ShardIds)); err != nil {
		return nil, status.Error(codes.DataLoss, err.Error())
	}
	return a.ecShardsHere(req.VolumeId), nil
}

func (a *adminServer) ecShardsHere(vid uint32) *volumepb.EcShardsResponse {
	ev, ok := a.s.store.EcVolume(vid)
	if !ok {
		return &volumepb.EcShardsResponse{}
	}
	return &volumepb.EcShardsResponse{ShardIds: shardIDs(ev.Shards())}
}

// holdersOf turns the request's holder list into a shard map and the gRPC
// address of a holder (for the index and journal).
func (a *adminServer) holdersOf(hs []*volumepb.EcShardHolder) (ecHolders, string) {
	m := ecHolders{}
	grpcAddr := ""
	for _, h := range hs {
		if h.Url == a.s.URL() {
			continue
		}
		for _, i := range h.ShardIds {
			m[int(i)] = h.Url
		}
		if grpcAddr == "" && len(h.ShardIds) > 0 {
			grpcAddr = h.GrpcAddr
		}
	}
	return m, grpcAddr
}

func (a *adminServer) EcRebuild(req *volumepb.EcRebuildRequest, stream volumepb.VolumeServer_EcRebuildServer) error {
	holders, src := a.holdersOf(req.Holders)
	ev, _ := a.s.store.EcVolume(req.VolumeId)
	if ev == nil && src == "" {
		return status.Error(codes.InvalidArgument, "no holder to copy the EC index from")
	}
	// The volume may be opened by EcRebuild itself: its local shards are
	// looked for at each read.
	fetch := &ecSource{s: a.s, ev: ev, vid: req.VolumeId, holders: holders}
	fetch.current = func() *erasure.Volume { cur, _ := a.s.store.EcVolume(req.VolumeId); return cur }
	err := a.s.store.EcRebuild(stream.Context(), req.VolumeId, req.Collection, shardSet(req.ShardIds),
		a.fileSource(src, req.VolumeId), fetch, progressSender(stream.Send))
	if err != nil {
		return ecGRPCError(err)
	}
	return stream.Send(&volumepb.EcProgress{Message: "rebuilt shards " + shardSet(req.ShardIds).String()})
}

func (a *adminServer) EcDecode(req *volumepb.EcDecodeRequest, stream volumepb.VolumeServer_EcDecodeServer) error {
	ev, ok := a.s.store.EcVolume(req.VolumeId)
	if !ok {
		return status.Errorf(codes.FailedPrecondition, "EC volume %d has no part on %s", req.VolumeId, a.s.URL())
	}
	holders, _ := a.holdersOf(req.Holders)
	if err := a.s.store.EcDecode(stream.Context(), req.VolumeId, req.Collection, a.s.ecFetch(ev, holders)); err != nil {
		return ecGRPCError(err)
	}
	return stream.Send(&volumepb.EcProgress{Message: "decoded"})
}

// readECFile streams a file of an EC volume (ReadVolumeFile with an EC extension).
func (a *adminServer) readECFile(req *volumepb.ReadVolumeFileRequest, stream volumepb.VolumeServer_ReadVolumeFileServer) error {
	f, err := a.s.store.EcFile(req.VolumeId, req.Ext)
	if err != nil {
		return grpcError(err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	buf := make([]byte, copyChunk)
	off := int64(req.Offset)
	for first := true; first || off < size; first = false {
		n := int(min(int64(len(buf)), size-off))
		if n > 0 {
			if _, err := f.ReadAt(buf[:n], off); err != nil {
				return status.Errorf(codes.Internal, "reading %s of EC volume %d: %v", req.Ext, req.VolumeId, err)
			}
		}
		if err := stream.Send(&volumepb.FileChunk{Data: buf[:n], FileSize: uint64(size)}); err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}

func isECExt(ext string) bool { return strings.HasPrefix(ext, ".ec") }

func (a *adminServer) EcSyncJournal(ctx context.Context, req *volumepb.EcSyncJournalRequest) (*volumepb.EcSyncJournalResponse, error) {
	ev, ok := a.s.store.EcVolume(req.VolumeId)
	if !ok {
		return nil, status.Errorf(codes.NotFound, "EC volume %d not on %s", req.VolumeId, a.s.URL())
	}
	var merged uint64
	for _, h := range req.Holders {
		if h.Url == a.s.URL() || h.GrpcAddr == "" {
			continue
		}
		var buf bytes.Buffer
		if err := a.fileSource(h.GrpcAddr, req.VolumeId)(ctx, ".ecj", &buf); err != nil {
			return nil, status.Errorf(codes.Unavailable, "journal of EC volume %d from %s: %v", req.VolumeId, h.Url, err)
		}
		keys, _ := erasure.ParseJournal(buf.Bytes())
		n, err := ev.MergeDeletes(keys)
		merged += uint64(n)
		if err != nil {
			return nil, grpcError(err)
		}
	}
	if merged > 0 {
		a.s.notifyChange()
	}
	return &volumepb.EcSyncJournalResponse{Merged: merged}, nil
}
