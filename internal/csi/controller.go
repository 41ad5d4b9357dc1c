package csi

import (
	"context"
	"errors"
	"strings"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

var wrapperspbBool = wrapperspb.Bool

// supportedModes are the access modes a Kelp volume serves: a filer
// directory can be mounted read-write on any number of nodes at once.
var supportedModes = map[csipb.VolumeCapability_AccessMode_Mode]bool{
	csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER:       true,
	csipb.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY:  true,
	csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY:   true,
	csipb.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER: true,
	csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER:  true,
}

// checkCaps refuses what a Kelp volume cannot be: a block device, or an
// access mode it does not serve. The message says which.
func checkCaps(caps []*csipb.VolumeCapability) error {
	if len(caps) == 0 {
		return status.Error(codes.InvalidArgument, "volume capabilities missing")
	}
	for _, c := range caps {
		if err := checkCap(c); err != nil {
			return err
		}
	}
	return nil
}

func checkCap(c *csipb.VolumeCapability) error {
	if c == nil {
		return status.Error(codes.InvalidArgument, "volume capability missing")
	}
	if c.GetBlock() != nil {
		return status.Error(codes.InvalidArgument, "block volumes are not supported: Kelp volumes are file systems (access type mount)")
	}
	if c.GetMount() == nil {
		return status.Error(codes.InvalidArgument, "volume capability needs access type mount")
	}
	if c.GetAccessMode() == nil || !supportedModes[c.GetAccessMode().GetMode()] {
		return status.Errorf(codes.InvalidArgument, "access mode %v is not supported", c.GetAccessMode().GetMode())
	}
	return nil
}

// capacity picks a volume's size from a capacity range.
func (d *Driver) capacity(r *csipb.CapacityRange) (int64, error) {
	req, lim := r.GetRequiredBytes(), r.GetLimitBytes()
	if req < 0 || lim < 0 {
		return 0, status.Error(codes.InvalidArgument, "negative capacity")
	}
	if lim > 0 && req > lim {
		return 0, status.Errorf(codes.InvalidArgument, "required bytes %d exceed the limit %d", req, lim)
	}
	switch {
	case req > 0:
		return req, nil
	case lim > 0 && lim < d.cfg.DefaultCapacity:
		return lim, nil
	}
	return d.cfg.DefaultCapacity, nil
}

func fits(r *csipb.CapacityRange, size int64) bool {
	return size >= r.GetRequiredBytes() && (r.GetLimitBytes() == 0 || size <= r.GetLimitBytes())
}

func (d *Driver) CreateVolume(ctx context.Context, req *csipb.CreateVolumeRequest) (*csipb.CreateVolumeResponse, error) {
	name := req.GetName()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "volume name missing")
	}
	if !validName(name) {
		return nil, status.Errorf(codes.InvalidArgument, "volume name %q: at most 255 bytes, no '/' or NUL", name)
	}
	if err := checkCaps(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	if req.GetVolumeContentSource() != nil {
		return nil, status.Error(codes.InvalidArgument, "volume content sources (snapshots, clones) are not supported")
	}
	size, err := d.capacity(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	defer d.volumeLock(name)()
	p := d.cfg.VolumeRoot + "/" + name
	q, err := d.filer.getQuota(ctx, p)
	switch {
	case err == nil:
		// Idempotent by name: the same request again gets the same volume.
		if !fits(req.GetCapacityRange(), q.MaxBytes) {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s exists with capacity %d", name, q.MaxBytes)
		}
		size = q.MaxBytes
	case errors.Is(err, errNotFound):
		if err := d.filer.mkdir(ctx, p); err != nil {
			return nil, filerErr("create volume "+name, err)
		}
		if _, err := d.filer.setQuota(ctx, p, size); err != nil {
			return nil, filerErr("set quota of "+name, err)
		}
	default:
		return nil, filerErr("look up volume "+name, err)
	}
	return &csipb.CreateVolumeResponse{Volume: &csipb.Volume{VolumeId: name, CapacityBytes: size}}, nil
}

func (d *Driver) DeleteVolume(ctx context.Context, req *csipb.DeleteVolumeRequest) (*csipb.DeleteVolumeResponse, error) {
	p, err := d.volumePath(req.GetVolumeId())
	if status.Code(err) == codes.NotFound {
		return &csipb.DeleteVolumeResponse{}, nil // never ours: nothing to delete
	}
	if err != nil {
		return nil, err
	}
	defer d.volumeLock(req.GetVolumeId())()
	if err := d.filer.removeAll(ctx, p); err != nil {
		return nil, filerErr("delete volume", err)
	}
	return &csipb.DeleteVolumeResponse{}, nil
}

// volumeQuota returns the quota of volume id: NotFound when it is not a volume.
func (d *Driver) volumeQuota(ctx context.Context, id string) (*quota, error) {
	p, err := d.volumePath(id)
	if err != nil {
		return nil, err
	}
	q, err := d.filer.getQuota(ctx, p)
	if err != nil {
		return nil, filerErr("volume "+id, err)
	}
	return q, nil
}

func (d *Driver) ValidateVolumeCapabilities(ctx context.Context, req *csipb.ValidateVolumeCapabilitiesRequest) (*csipb.ValidateVolumeCapabilitiesResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume id missing")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume capabilities missing")
	}
	if _, err := d.volumeQuota(ctx, req.GetVolumeId()); err != nil {
		return nil, err
	}
	if err := checkCaps(req.GetVolumeCapabilities()); err != nil {
		return &csipb.ValidateVolumeCapabilitiesResponse{Message: status.Convert(err).Message()}, nil
	}
	return &csipb.ValidateVolumeCapabilitiesResponse{Confirmed: &csipb.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}}, nil
}

// tokenPrefix marks ListVolumes tokens: the token is the last name listed,
// so a token stays valid when that volume is deleted.
const tokenPrefix = "after:"

func (d *Driver) ListVolumes(ctx context.Context, req *csipb.ListVolumesRequest) (*csipb.ListVolumesResponse, error) {
	if req.GetMaxEntries() < 0 {
		return nil, status.Error(codes.InvalidArgument, "max_entries is negative")
	}
	after := ""
	if t := req.GetStartingToken(); t != "" {
		if !strings.HasPrefix(t, tokenPrefix) {
			return nil, status.Errorf(codes.Aborted, "starting token %q was not given by this driver", t)
		}
		after = strings.TrimPrefix(t, tokenPrefix)
	}
	limit := int(req.GetMaxEntries())
	if limit == 0 || limit > 10000 {
		limit = 10000
	}
	names, more, err := d.filer.list(ctx, d.cfg.VolumeRoot, after, limit)
	if errors.Is(err, errNotFound) {
		names, more, err = nil, false, nil
	}
	if err != nil {
		return nil, filerErr("list volumes", err)
	}
	resp := &csipb.ListVolumesResponse{}
	for _, n := range names {
		q, err := d.filer.getQuota(ctx, d.cfg.VolumeRoot+"/"+n)
		if errors.Is(err, errNotFound) {
			continue // deleted meanwhile, or not a volume
		}
		if err != nil {
			return nil, filerErr("list volumes", err)
		}
		resp.Entries = append(resp.Entries, &csipb.ListVolumesResponse_Entry{Volume: &csipb.Volume{VolumeId: n, CapacityBytes: q.MaxBytes}})
	}
	if more && len(names) > 0 {
		resp.NextToken = tokenPrefix + names[len(names)-1]
	}
	return resp, nil
}

// GetCapacity is the cluster's free space as the filer reports it.
func (d *Driver) GetCapacity(ctx context.Context, req *csipb.GetCapacityRequest) (*csipb.GetCapacityResponse, error) {
	for _, c := range req.GetVolumeCapabilities() {
		if err := checkCap(c); err != nil {
			return &csipb.GetCapacityResponse{}, nil
		}
	}
	free, err := d.freeBytes(ctx)
	if err != nil {
		return nil, filerErr("capacity", err)
	}
	return &csipb.GetCapacityResponse{AvailableCapacity: free}, nil
}

func (d *Driver) ControllerGetCapabilities(context.Context, *csipb.ControllerGetCapabilitiesRequest) (*csipb.ControllerGetCapabilitiesResponse, error) {
	var caps []*csipb.ControllerServiceCapability
	for _, t := range []csipb.ControllerServiceCapability_RPC_Type{
		csipb.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csipb.ControllerServiceCapability_RPC_LIST_VOLUMES,
		csipb.ControllerServiceCapability_RPC_GET_CAPACITY,
		csipb.ControllerServiceCapability_RPC_EXPAND_VOLUME,
	} {
		caps = append(caps, &csipb.ControllerServiceCapability{Type: &csipb.ControllerServiceCapability_Rpc{
			Rpc: &csipb.ControllerServiceCapability_RPC{Type: t}}})
	}
	return &csipb.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

func (d *Driver) ControllerExpandVolume(ctx context.Context, req *csipb.ControllerExpandVolumeRequest) (*csipb.ControllerExpandVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume id missing")
	}
	if req.GetCapacityRange() == nil {
		return nil, status.Error(codes.InvalidArgument, "capacity range missing")
	}
	size, err := d.capacity(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	defer d.volumeLock(req.GetVolumeId())()
	q, err := d.volumeQuota(ctx, req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if q.MaxBytes < size {
		if q, err = d.filer.setQuota(ctx, q.Path, size); err != nil {
			return nil, filerErr("expand volume", err)
		}
	}
	// The quota is the filer's: every node sees the new size at once.
	return &csipb.ControllerExpandVolumeResponse{CapacityBytes: q.MaxBytes, NodeExpansionRequired: false}, nil
}
