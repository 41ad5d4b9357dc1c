package volumeserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/pb/volumepb"
	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/store"
	"github.com/kelpfs/kelp/internal/ttl"
)

// adminServer implements the gRPC admin API on top of the store.
type adminServer struct {
	volumepb.UnimplementedVolumeServerServer
	s *Server
}

func (a *adminServer) AllocateVolume(ctx context.Context, req *volumepb.AllocateVolumeRequest) (*volumepb.AllocateVolumeResponse, error) {
	code, err := replication.Parse(req.Replication)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	t, err := ttl.Parse(req.Ttl)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := a.s.store.Allocate(req.VolumeId, req.Collection, code, t); err != nil {
		return nil, grpcError(err)
	}
	return &volumepb.AllocateVolumeResponse{HeartbeatSequence: a.s.heartbeatSeq.Load()}, nil
}

func (a *adminServer) DeleteVolume(ctx context.Context, req *volumepb.DeleteVolumeRequest) (*volumepb.DeleteVolumeResponse, error) {
	if err := a.s.store.Delete(req.VolumeId); err != nil {
		return nil, grpcError(err)
	}
	return &volumepb.DeleteVolumeResponse{}, nil
}

func (a *adminServer) MarkVolume(ctx context.Context, req *volumepb.MarkVolumeRequest) (*volumepb.MarkVolumeResponse, error) {
	if err := a.s.store.MarkReadOnly(req.VolumeId, req.ReadOnly); err != nil {
		return nil, grpcError(err)
	}
	return &volumepb.MarkVolumeResponse{}, nil
}

func (a *adminServer) VacuumVolume(ctx context.Context, req *volumepb.VacuumVolumeRequest) (*volumepb.VacuumVolumeResponse, error) {
	res, err := a.s.store.Vacuum(ctx, req.VolumeId, req.GarbageThreshold)
	if err != nil {
		return nil, grpcError(err)
	}
	return &volumepb.VacuumVolumeResponse{
		Vacuumed:           res.Vacuumed,
		GarbageRatioBefore: res.GarbageRatioBefore,
		SizeBefore:         uint64(res.SizeBefore),
		SizeAfter:          uint64(res.SizeAfter),
	}, nil
}

func (a *adminServer) VolumeStatus(ctx context.Context, req *volumepb.VolumeStatusRequest) (*volumepb.VolumeStatusResponse, error) {
	v, ok := a.s.store.Volume(req.VolumeId)
	if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %d not found", req.VolumeId)
	}
	st := v.Stats()
	return &volumepb.VolumeStatusResponse{
		Size:         uint64(st.Size),
		FileCount:    uint64(st.FileCount),
		DeleteCount:  uint64(st.DeleteCount),
		DeletedBytes: uint64(st.DeletedBytes),
		ReadOnly:     st.ReadOnly,
		GarbageRatio: st.GarbageRatio,
	}, nil
}

// grpcError maps store errors to gRPC codes, the admin API's one error table.
func grpcError(err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, store.ErrExists):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, store.ErrNoSlot):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

func (a *adminServer) ConfigureVolume(ctx context.Context, req *volumepb.ConfigureVolumeRequest) (*volumepb.ConfigureVolumeResponse, error) {
	code, err := replication.Parse(req.Replication)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := a.s.store.Configure(req.VolumeId, code); err != nil {
		return nil, grpcError(err)
	}
	return &volumepb.ConfigureVolumeResponse{}, nil
}

// copyChunk is the size of one message of a volume file stream.
const copyChunk = 1 << 20

// ReadVolumeFile streams a volume's .dat as it is now (see volume.OpenData).
func (a *adminServer) ReadVolumeFile(req *volumepb.ReadVolumeFileRequest, stream volumepb.VolumeServer_ReadVolumeFileServer) error {
	if isECExt(req.Ext) {
		return a.readECFile(req, stream)
	}
	if req.Ext != ".dat" {
		return status.Errorf(codes.InvalidArgument, "only .dat can be read, not %q: the index is rebuilt from it", req.Ext)
	}
	v, ok := a.s.store.Volume(req.VolumeId)
	if !ok {
		return status.Errorf(codes.NotFound, "volume %d not found", req.VolumeId)
	}
	r, size, release, err := v.OpenData()
	if err != nil {
		return grpcError(err)
	}
	defer release()
	collection := v.Stats().Collection
	buf := make([]byte, copyChunk)
	off := int64(req.Offset)
	for first := true; first || off < size; first = false {
		n := int(min(int64(len(buf)), size-off))
		if n > 0 {
			if _, err := r.ReadAt(buf[:n], off); err != nil {
				return status.Errorf(codes.Internal, "reading volume %d: %v", req.VolumeId, err)
			}
		}
		msg := &volumepb.FileChunk{Data: buf[:n], FileSize: uint64(size)}
		if first {
			msg.Collection = collection
		}
		if err := stream.Send(msg); err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}

// CopyVolume pulls a whole volume from another server and loads it here.
func (a *adminServer) CopyVolume(req *volumepb.CopyVolumeRequest, stream volumepb.VolumeServer_CopyVolumeServer) error {
	if _, ok := a.s.store.Volume(req.VolumeId); ok {
		return status.Errorf(codes.AlreadyExists, "volume %d already exists on %s", req.VolumeId, a.s.URL())
	}
	conn, err := a.s.conns.Get(req.SourceGrpcAddr)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "source %q: %v", req.SourceGrpcAddr, err)
	}
	ctx := stream.Context()
	src, err := volumepb.NewVolumeServerClient(conn).ReadVolumeFile(ctx, &volumepb.ReadVolumeFileRequest{VolumeId: req.VolumeId, Ext: ".dat"})
	if err != nil {
		return err
	}
	first, err := src.Recv()
	if err != nil {
		return err
	}
	var copied uint64
	lastReport := time.Now()
	err = a.s.store.Import(ctx, req.VolumeId, first.Collection, func(w io.Writer) error {
		for msg := first; ; {
			if _, err := w.Write(msg.Data); err != nil {
				return err
			}
			copied += uint64(len(msg.Data))
			if time.Since(lastReport) > 200*time.Millisecond {
				lastReport = time.Now()
				if err := stream.Send(&volumepb.CopyVolumeProgress{BytesCopied: copied, BytesTotal: first.FileSize}); err != nil {
					return err
				}
			}
			if msg, err = src.Recv(); err == io.EOF {
				break
			} else if err != nil {
				return err
			}
		}
		if copied != first.FileSize {
			return fmt.Errorf("copied %d of %d bytes", copied, first.FileSize)
		}
		return nil
	})
	if err != nil {
		return grpcError(err)
	}
	return stream.Send(&volumepb.CopyVolumeProgress{BytesCopied: copied, BytesTotal: first.FileSize, Done: true})
}
