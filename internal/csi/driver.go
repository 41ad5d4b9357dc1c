package csi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/pb"
)

// Name is the driver's name as Kubernetes sees it (CSIDriver object, StorageClass provisioner).
const Name = "csi.kelpfs.io"

// Version is reported in GetPluginInfo.
var Version = "dev"

// Config configures a Driver.
type Config struct {
	// Filer is the filer's HTTP address host:port (gRPC is that + 10000).
	Filer string
	// FilerGRPC is the filer's gRPC address; "" means Filer's port + 10000.
	FilerGRPC string
	// NodeID is this node's name (NodeGetInfo); needed with Node.
	NodeID string
	// Controller and Node choose the services served.
	Controller, Node bool
	// VolumeRoot is the filer directory holding one directory per volume
	// (default /csi-volumes).
	VolumeRoot string
	// StateDir keeps one state file per staged volume (default
	// /var/lib/kelp-csi); see the package doc.
	StateDir string
	// DefaultCapacity is the capacity of a volume created without a
	// capacity range (default 1 GiB).
	DefaultCapacity int64
	// SyncClose makes close(2) in a volume commit the file before it
	// returns, so that a write past the capacity fails there with ENOSPC
	// (without it only fsync reports it; see fuse.Options.SyncClose).
	SyncClose bool
	// Collection and Replication of the chunks written through mounts.
	Collection, Replication string
	Logger                  *slog.Logger
}

// Driver is the CSI plugin.
type Driver struct {
	csipb.UnimplementedIdentityServer
	csipb.UnimplementedControllerServer
	csipb.UnimplementedNodeServer

	cfg   Config
	log   *slog.Logger
	filer *filerClient

	mu     sync.Mutex             // serialises node operations and guards mounts
	mounts map[string]*volMount   // volume id -> staged mount
	locks  map[string]*sync.Mutex // volume id (controller) -> lock
}

// New checks cfg and returns a Driver; Run serves it.
func New(cfg Config) (*Driver, error) {
	if cfg.Filer == "" {
		return nil, errors.New("csi: --filer is required")
	}
	if !cfg.Controller && !cfg.Node {
		return nil, errors.New("csi: serve at least one of --controller and --node")
	}
	if cfg.Node && cfg.NodeID == "" {
		return nil, errors.New("csi: --node-id is required with --node")
	}
	if cfg.FilerGRPC == "" {
		a, err := pb.GRPCAddress(cfg.Filer)
		if err != nil {
			return nil, fmt.Errorf("csi: --filer: %w", err)
		}
		cfg.FilerGRPC = a
	}
	if cfg.VolumeRoot == "" {
		cfg.VolumeRoot = "/csi-volumes"
	}
	cfg.VolumeRoot = path.Clean("/" + cfg.VolumeRoot)
	if cfg.VolumeRoot == "/" {
		return nil, errors.New("csi: the volume root cannot be the filer's root")
	}
	if cfg.StateDir == "" {
		cfg.StateDir = "/var/lib/kelp-csi"
	}
	if cfg.DefaultCapacity <= 0 {
		cfg.DefaultCapacity = 1 << 30
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Driver{
		cfg:    cfg,
		log:    cfg.Logger,
		filer:  &filerClient{base: "http://" + cfg.Filer, hc: &http.Client{Timeout: 30 * time.Second}},
		mounts: map[string]*volMount{},
		locks:  map[string]*sync.Mutex{},
	}, nil
}

// Listen opens a CSI endpoint: unix:///path/csi.sock (a stale socket file
// is removed) or tcp://host:port.
func Listen(endpoint string) (net.Listener, error) {
	switch {
	case strings.HasPrefix(endpoint, "unix://"):
		p := strings.TrimPrefix(endpoint, "unix://")
		if p == "" {
			return nil, fmt.Errorf("csi: endpoint %q has no path", endpoint)
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("csi: remove stale socket: %w", err)
		}
		if err := os.MkdirAll(path.Dir(p), 0o755); err != nil {
			return nil, err
		}
		return net.Listen("unix", p)
	case strings.HasPrefix(endpoint, "tcp://"):
		return net.Listen("tcp", strings.TrimPrefix(endpoint, "tcp://"))
	}
	return nil, fmt.Errorf("csi: endpoint %q: want unix:///path or tcp://host:port", endpoint)
}

// Run restores the node's mounts (Node), then serves CSI on l until ctx
// ends. Mounts stay in place at the end: a restarted plugin takes them
// over (see the package doc).
func (d *Driver) Run(ctx context.Context, l net.Listener) error {
	if d.cfg.Node {
		if err := os.MkdirAll(d.cfg.StateDir, 0o700); err != nil {
			return fmt.Errorf("csi: state dir: %w", err)
		}
		d.restore(ctx)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(d.logCalls))
	csipb.RegisterIdentityServer(srv, d)
	if d.cfg.Controller {
		csipb.RegisterControllerServer(srv, d)
	}
	if d.cfg.Node {
		csipb.RegisterNodeServer(srv, d)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	srv.GracefulStop()
	return nil
}

// Close serves nobody any more: it unmounts every FUSE mount this process
// serves (for tests; a real plugin leaves them for its successor).
func (d *Driver) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, m := range d.mounts {
		m.stop()
		delete(d.mounts, id)
	}
}

func (d *Driver) logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	if err != nil {
		d.log.Info("csi call failed", "method", info.FullMethod, "err", err)
	} else {
		d.log.Debug("csi call", "method", info.FullMethod)
	}
	return resp, err
}

// ---- Identity ----

func (d *Driver) GetPluginInfo(context.Context, *csipb.GetPluginInfoRequest) (*csipb.GetPluginInfoResponse, error) {
	return &csipb.GetPluginInfoResponse{Name: Name, VendorVersion: Version}, nil
}

func (d *Driver) GetPluginCapabilities(context.Context, *csipb.GetPluginCapabilitiesRequest) (*csipb.GetPluginCapabilitiesResponse, error) {
	var caps []*csipb.PluginCapability
	if d.cfg.Controller {
		caps = append(caps, &csipb.PluginCapability{Type: &csipb.PluginCapability_Service_{
			Service: &csipb.PluginCapability_Service{Type: csipb.PluginCapability_Service_CONTROLLER_SERVICE}}})
	}
	caps = append(caps, &csipb.PluginCapability{Type: &csipb.PluginCapability_VolumeExpansion_{
		VolumeExpansion: &csipb.PluginCapability_VolumeExpansion{Type: csipb.PluginCapability_VolumeExpansion_ONLINE}}})
	return &csipb.GetPluginCapabilitiesResponse{Capabilities: caps}, nil
}

// Probe is ready only while the filer answers.
func (d *Driver) Probe(ctx context.Context, _ *csipb.ProbeRequest) (*csipb.ProbeResponse, error) {
	if err := d.filer.healthy(ctx); err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "filer %s: %v", d.cfg.Filer, err)
	}
	return &csipb.ProbeResponse{Ready: wrapperspbBool(true)}, nil
}

// ---- helpers ----

// volumePath is the filer directory of volume id, or an error for an id
// that cannot be one of ours.
func (d *Driver) volumePath(id string) (string, error) {
	if id == "" {
		return "", status.Error(codes.InvalidArgument, "volume id missing")
	}
	if !validName(id) {
		return "", status.Errorf(codes.NotFound, "volume %q: not a volume of this driver", id)
	}
	return d.cfg.VolumeRoot + "/" + id, nil
}

// validName: a volume name usable as one filer path component.
func validName(n string) bool {
	return n != "" && n != "." && n != ".." && len(n) <= 255 && !strings.ContainsAny(n, "/\x00")
}

// filerErr maps a filer client error to a gRPC status.
func filerErr(what string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && status.Code(err) != codes.Unknown {
		return err
	}
	if errors.Is(err, errNotFound) {
		return status.Errorf(codes.NotFound, "%s: %v", what, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.Errorf(codes.DeadlineExceeded, "%s: %v", what, err)
	}
	return status.Errorf(codes.Unavailable, "%s: %v", what, err)
}

func (d *Driver) volumeLock(id string) func() {
	d.mu.Lock()
	l := d.locks[id]
	if l == nil {
		l = &sync.Mutex{}
		d.locks[id] = l
	}
	d.mu.Unlock()
	l.Lock()
	return l.Unlock
}
