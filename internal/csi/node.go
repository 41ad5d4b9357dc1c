package csi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/fsview"
	"github.com/kelpfs/kelp/internal/fuse"
	"github.com/kelpfs/kelp/internal/pb"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// volState is what the node remembers of a staged volume, in
// StateDir/<volume id>.json, to mount it again after a restart.
type volState struct {
	VolumeID string   `json:"volumeId"`
	Staging  string   `json:"staging"`
	ReadOnly bool     `json:"readOnly,omitempty"`
	Targets  []target `json:"targets,omitempty"`
}

type target struct {
	Path     string `json:"path"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// volMount is a staged volume served by this process.
type volMount struct {
	st   volState
	view *fsview.FS
	m    *fuse.Mount
}

func (m *volMount) stop() {
	if m.m != nil {
		m.m.Unmount()
	}
	if m.view != nil {
		m.view.Close()
	}
}

func (d *Driver) statePath(id string) string { return filepath.Join(d.cfg.StateDir, id+".json") }

func (d *Driver) saveState(st *volState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp := d.statePath(st.VolumeID) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, d.statePath(st.VolumeID))
}

// mountState tells what is at dir: a live mount, a dead one (ENOTCONN:
// its FUSE server is gone), or no mount.
type mountState int

const (
	notMounted mountState = iota
	mounted
	stale
)

func probeMount(dir string) mountState {
	var st, parent unix.Stat_t
	err := unix.Stat(dir, &st)
	if err != nil {
		if errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.EIO) {
			return stale
		}
		return notMounted
	}
	if isMountPoint(dir) {
		return mounted
	}
	if unix.Stat(filepath.Dir(dir), &parent) == nil && parent.Dev != st.Dev {
		return mounted
	}
	return notMounted
}

// isMountPoint looks dir up in /proc/self/mountinfo (a bind mount of a
// directory on the same device is a mount point the device check misses).
func isMountPoint(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	clean := filepath.Clean(dir)
	for _, line := range splitLines(string(b)) {
		f := splitFields(line)
		if len(f) > 4 && unescapeMount(f[4]) == clean {
			return true
		}
	}
	return false
}

// unmount detaches dir, lazily when it is busy or dead; not mounted is fine.
func unmount(dir string) error {
	if probeMount(dir) == notMounted {
		return nil
	}
	err := unix.Unmount(dir, 0)
	if err == nil || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOENT) {
		return nil
	}
	if lerr := unix.Unmount(dir, unix.MNT_DETACH); lerr != nil && !errors.Is(lerr, syscall.EINVAL) {
		return fmt.Errorf("unmount %s: %v; lazily: %w", dir, err, lerr)
	}
	return nil
}

// mountVolume mounts volume st.VolumeID with FUSE at st.Staging.
func (d *Driver) mountVolume(ctx context.Context, st volState) (*volMount, error) {
	view, err := fsview.New(ctx, fsview.Config{Filer: d.cfg.FilerGRPC, Root: d.cfg.VolumeRoot + "/" + st.VolumeID,
		Collection: d.cfg.Collection, Replication: d.cfg.Replication, ConnectTimeout: 10 * time.Second,
		Logger: d.log, DeferDurability: true})
	if err != nil {
		return nil, err
	}
	m, err := fuse.New(view, fuse.Options{Dir: st.Staging, FsName: "kelp:" + st.VolumeID, AllowOther: true,
		ReadOnly: st.ReadOnly, SyncClose: d.cfg.SyncClose, Logger: d.log})
	if err != nil {
		view.Close()
		return nil, err
	}
	return &volMount{st: st, view: view, m: m}, nil
}

func bindMount(src, dst string, readOnly bool) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", src, dst, err)
	}
	if readOnly {
		if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			unix.Unmount(dst, unix.MNT_DETACH)
			return fmt.Errorf("remount %s read-only: %w", dst, err)
		}
	}
	return nil
}

// restore takes over the mounts a previous run of the plugin left: each
// recorded staging path gets a fresh FUSE mount (a dead one detached
// first), then each publish target a fresh bind of it.
func (d *Driver) restore(ctx context.Context) {
	files, _ := filepath.Glob(filepath.Join(d.cfg.StateDir, "*.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		var st volState
		if err == nil {
			err = json.Unmarshal(b, &st)
		}
		if err != nil || st.VolumeID == "" {
			d.log.Warn("csi: unreadable state file, ignored", "file", f, "err", err)
			continue
		}
		if err := d.restoreOne(ctx, st); err != nil {
			d.log.Error("csi: could not restore a volume's mounts", "volume", st.VolumeID, "err", err)
		}
	}
}

func (d *Driver) restoreOne(ctx context.Context, st volState) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, t := range st.Targets {
		if err := unmount(t.Path); err != nil {
			return err
		}
	}
	if err := unmount(st.Staging); err != nil {
		return err
	}
	m, err := d.mountVolume(ctx, st)
	if err != nil {
		return err
	}
	d.mounts[st.VolumeID] = m
	for _, t := range st.Targets {
		if err := os.MkdirAll(t.Path, 0o750); err != nil {
			return err
		}
		if err := bindMount(st.Staging, t.Path, t.ReadOnly); err != nil {
			return err
		}
	}
	d.log.Info("csi: volume mounted again after a restart", "volume", st.VolumeID, "targets", len(st.Targets))
	return nil
}

// ---- Node service ----

func (d *Driver) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	return &csipb.NodeGetInfoResponse{NodeId: d.cfg.NodeID}, nil
}

func (d *Driver) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	var caps []*csipb.NodeServiceCapability
	for _, t := range []csipb.NodeServiceCapability_RPC_Type{
		csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		csipb.NodeServiceCapability_RPC_EXPAND_VOLUME,
	} {
		caps = append(caps, &csipb.NodeServiceCapability{Type: &csipb.NodeServiceCapability_Rpc{
			Rpc: &csipb.NodeServiceCapability_RPC{Type: t}}})
	}
	return &csipb.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

func isReadOnly(c *csipb.VolumeCapability) bool {
	switch c.GetAccessMode().GetMode() {
	case csipb.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY, csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY:
		return true
	}
	return false
}

func (d *Driver) NodeStageVolume(ctx context.Context, req *csipb.NodeStageVolumeRequest) (*csipb.NodeStageVolumeResponse, error) {
	id, staging := req.GetVolumeId(), req.GetStagingTargetPath()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume id missing")
	}
	if staging == "" {
		return nil, status.Error(codes.InvalidArgument, "staging target path missing")
	}
	if req.GetVolumeCapability() == nil {
		return nil, status.Error(codes.InvalidArgument, "volume capability missing")
	}
	if err := checkCap(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	if _, err := d.volumeQuota(ctx, id); err != nil {
		return nil, err
	}
	staging = filepath.Clean(staging)
	d.mu.Lock()
	defer d.mu.Unlock()
	if m := d.mounts[id]; m != nil {
		if m.st.Staging == staging && probeMount(staging) == mounted {
			return &csipb.NodeStageVolumeResponse{}, nil // already staged there
		}
		if m.st.Staging != staging {
			return nil, status.Errorf(codes.FailedPrecondition, "volume %s is staged at %s", id, m.st.Staging)
		}
		m.stop() // dead: mount again below
		delete(d.mounts, id)
	}
	if err := unmount(staging); err != nil {
		return nil, status.Errorf(codes.Internal, "staging path: %v", err)
	}
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "staging path: %v", err)
	}
	st := volState{VolumeID: id, Staging: staging}
	m, err := d.mountVolume(ctx, st)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "mount volume %s: %v", id, err)
	}
	if err := d.saveState(&st); err != nil {
		m.stop()
		return nil, status.Errorf(codes.Internal, "state file: %v", err)
	}
	d.mounts[id] = m
	return &csipb.NodeStageVolumeResponse{}, nil
}

func (d *Driver) NodeUnstageVolume(ctx context.Context, req *csipb.NodeUnstageVolumeRequest) (*csipb.NodeUnstageVolumeResponse, error) {
	id, staging := req.GetVolumeId(), req.GetStagingTargetPath()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume id missing")
	}
	if staging == "" {
		return nil, status.Error(codes.InvalidArgument, "staging target path missing")
	}
	staging = filepath.Clean(staging)
	d.mu.Lock()
	defer d.mu.Unlock()
	if m := d.mounts[id]; m != nil && m.st.Staging == staging {
		m.stop()
		delete(d.mounts, id)
	}
	// Always unmount what is there, also a mount a crashed run left.
	if err := unmount(staging); err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	if err := os.Remove(d.statePath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "state file: %v", err)
	}
	return &csipb.NodeUnstageVolumeResponse{}, nil
}

func (d *Driver) NodePublishVolume(ctx context.Context, req *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	id, tp, staging := req.GetVolumeId(), req.GetTargetPath(), req.GetStagingTargetPath()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume id missing")
	}
	if tp == "" {
		return nil, status.Error(codes.InvalidArgument, "target path missing")
	}
	if req.GetVolumeCapability() == nil {
		return nil, status.Error(codes.InvalidArgument, "volume capability missing")
	}
	if err := checkCap(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	if staging == "" {
		return nil, status.Error(codes.FailedPrecondition, "staging target path missing: stage the volume first (STAGE_UNSTAGE_VOLUME)")
	}
	if _, err := d.volumeQuota(ctx, id); err != nil {
		return nil, err
	}
	tp, staging = filepath.Clean(tp), filepath.Clean(staging)
	ro := req.GetReadonly() || isReadOnly(req.GetVolumeCapability())
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.mounts[id]
	if m == nil || m.st.Staging != staging {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged at %s", id, staging)
	}
	if i := slices.IndexFunc(m.st.Targets, func(t target) bool { return t.Path == tp }); i >= 0 {
		if probeMount(tp) == mounted {
			if m.st.Targets[i].ReadOnly != ro {
				return nil, status.Errorf(codes.AlreadyExists, "%s is published with another read-only flag", tp)
			}
			return &csipb.NodePublishVolumeResponse{}, nil
		}
		m.st.Targets = slices.Delete(m.st.Targets, i, i+1)
	}
	if err := unmount(tp); err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	if err := os.MkdirAll(tp, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "target path: %v", err)
	}
	if err := bindMount(staging, tp, ro); err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	m.st.Targets = append(m.st.Targets, target{Path: tp, ReadOnly: ro})
	if err := d.saveState(&m.st); err != nil {
		return nil, status.Errorf(codes.Internal, "state file: %v", err)
	}
	return &csipb.NodePublishVolumeResponse{}, nil
}

func (d *Driver) NodeUnpublishVolume(ctx context.Context, req *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	id, tp := req.GetVolumeId(), req.GetTargetPath()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume id missing")
	}
	if tp == "" {
		return nil, status.Error(codes.InvalidArgument, "target path missing")
	}
	tp = filepath.Clean(tp)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := unmount(tp); err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	if err := os.Remove(tp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "remove target path: %v", err)
	}
	if m := d.mounts[id]; m != nil {
		m.st.Targets = slices.DeleteFunc(m.st.Targets, func(t target) bool { return t.Path == tp })
		if err := d.saveState(&m.st); err != nil {
			return nil, status.Errorf(codes.Internal, "state file: %v", err)
		}
	}
	return &csipb.NodeUnpublishVolumeResponse{}, nil
}

func (d *Driver) NodeGetVolumeStats(ctx context.Context, req *csipb.NodeGetVolumeStatsRequest) (*csipb.NodeGetVolumeStatsResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume id missing")
	}
	if req.GetVolumePath() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume path missing")
	}
	q, err := d.volumeQuota(ctx, req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if probeMount(filepath.Clean(req.GetVolumePath())) != mounted {
		return nil, status.Errorf(codes.NotFound, "volume %s is not mounted at %s", req.GetVolumeId(), req.GetVolumePath())
	}
	usage := []*csipb.VolumeUsage{{Unit: csipb.VolumeUsage_BYTES, Total: q.MaxBytes, Used: q.UsedBytes, Available: max(q.MaxBytes-q.UsedBytes, 0)}}
	if q.MaxFiles > 0 {
		usage = append(usage, &csipb.VolumeUsage{Unit: csipb.VolumeUsage_INODES, Total: q.MaxFiles, Used: q.UsedFiles, Available: max(q.MaxFiles-q.UsedFiles, 0)})
	} else {
		usage = append(usage, &csipb.VolumeUsage{Unit: csipb.VolumeUsage_INODES, Used: q.UsedFiles})
	}
	return &csipb.NodeGetVolumeStatsResponse{Usage: usage}, nil
}

// NodeExpandVolume has nothing to do: the capacity is the filer's quota,
// raised by ControllerExpandVolume and seen by every mount at once.
func (d *Driver) NodeExpandVolume(ctx context.Context, req *csipb.NodeExpandVolumeRequest) (*csipb.NodeExpandVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume id missing")
	}
	if req.GetVolumePath() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume path missing")
	}
	q, err := d.volumeQuota(ctx, req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(req.GetVolumePath()); err != nil {
		return nil, status.Errorf(codes.NotFound, "volume path %s: %v", req.GetVolumePath(), err)
	}
	return &csipb.NodeExpandVolumeResponse{CapacityBytes: q.MaxBytes}, nil
}

// freeBytes asks the filer for the cluster's free space (gRPC Statfs).
func (d *Driver) freeBytes(ctx context.Context) (int64, error) {
	conn, err := grpc.NewClient(d.cfg.FilerGRPC, pb.DialOptions()...)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := filerpb.NewFilerClient(conn).Statfs(ctx, &filerpb.StatfsRequest{})
	if err != nil {
		return 0, err
	}
	return int64(min(r.GetFreeBytes(), 1<<62)), nil
}
