package csi

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/testcluster"
	"github.com/kelpfs/kelp/internal/testutil"
)

// TestMain lets the restart test run a driver in a child process (the test
// binary itself) that it can kill -9, FUSE mounts and all.
func TestMain(m *testing.M) {
	if os.Getenv("KELP_CSI_CHILD") == "1" {
		runChild()
		return
	}
	os.Exit(m.Run())
}

func runChild() {
	d, err := New(Config{Filer: os.Getenv("KELP_CSI_FILER"), FilerGRPC: os.Getenv("KELP_CSI_FILER_GRPC"), NodeID: "n1", Controller: true, Node: true,
		StateDir: os.Getenv("KELP_CSI_STATE"), Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		panic(err)
	}
	l, err := Listen("unix://" + os.Getenv("KELP_CSI_SOCK"))
	if err != nil {
		panic(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	d.Run(ctx, l)
}

func needFUSE(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		testutil.SkipOrFail(t, "no /dev/fuse")
	}
	if os.Geteuid() != 0 {
		testutil.SkipOrFail(t, "CSI node operations (bind mounts) need root")
	}
}

func startFiler(t *testing.T) (string, string) {
	t.Helper()
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}}})
	s, err := filerserver.New(filerserver.Config{Masters: c.MasterAddrs(), Dir: t.TempDir(), ChunkSize: 64 << 10,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s.Addr(), s.GRPCAddr()
}

// startDriver serves a driver in process on a unix socket and returns the socket path.
func startDriver(t *testing.T, cfg Config) (string, *Driver) {
	t.Helper()
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "csi.sock")
	l, err := Listen("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, l) }()
	t.Cleanup(func() { cancel(); <-done; d.Close() })
	waitServing(t, sock)
	return sock, d
}

// waitServing returns once the driver at sock answers a Probe. The socket
// accepts connections before Run serves them; csi-sanity's own connect
// waits for a gRPC connection state it can miss, and once failed a whole
// spec after a minute (CI, under load), so the suite starts only when the
// driver answers.
func waitServing(t *testing.T, sock string) {
	t.Helper()
	conn := dial(t, sock)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := csipb.NewIdentityClient(conn).Probe(ctx, &csipb.ProbeRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("the driver at %s does not answer: %v", sock, err)
	}
}

// TestSanity runs the upstream csi-sanity suite against the driver, with
// real FUSE mounts of an in-process cluster's filer.
func TestSanity(t *testing.T) {
	needFUSE(t)
	filer, fg := startFiler(t)
	sock, _ := startDriver(t, Config{Filer: filer, FilerGRPC: fg, NodeID: "node1", Controller: true, Node: true, StateDir: t.TempDir()})
	cfg := sanity.NewTestConfig()
	cfg.Address = sock
	base := t.TempDir()
	cfg.TargetPath = filepath.Join(base, "target")
	cfg.StagingPath = filepath.Join(base, "staging")
	cfg.TestVolumeSize = 1 << 30
	sanity.Test(t, cfg)
}

func dial(t *testing.T, sock string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

var mountCap = &csipb.VolumeCapability{
	AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{}},
	AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
}

// TestQuotaThroughMount: a volume's capacity is enforced through its
// mount (ENOSPC), what was written stays, and the stats show the usage.
func TestQuotaThroughMount(t *testing.T) {
	needFUSE(t)
	ctx := context.Background()
	filer, fg := startFiler(t)
	sock, _ := startDriver(t, Config{Filer: filer, FilerGRPC: fg, NodeID: "node1", Controller: true, Node: true, StateDir: t.TempDir(), SyncClose: true})
	conn := dial(t, sock)
	cc, nc := csipb.NewControllerClient(conn), csipb.NewNodeClient(conn)
	vol, err := cc.CreateVolume(ctx, &csipb.CreateVolumeRequest{Name: "pvc-q", VolumeCapabilities: []*csipb.VolumeCapability{mountCap},
		CapacityRange: &csipb.CapacityRange{RequiredBytes: 100 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	staging, tp := filepath.Join(base, "staging"), filepath.Join(base, "pod", "mount")
	if _, err := nc.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{VolumeId: vol.Volume.VolumeId, StagingTargetPath: staging, VolumeCapability: mountCap}); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{VolumeId: vol.Volume.VolumeId, StagingTargetPath: staging, TargetPath: tp, VolumeCapability: mountCap}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		nc.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: vol.Volume.VolumeId, TargetPath: tp})
		nc.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: vol.Volume.VolumeId, StagingTargetPath: staging})
	})
	keep := make([]byte, 60<<10)
	writeSync(t, filepath.Join(tp, "keep"), keep, nil)
	writeSync(t, filepath.Join(tp, "big"), make([]byte, 60<<10), syscall.ENOSPC)
	// With SyncClose, close reports it to a writer that never fsyncs.
	if err := os.WriteFile(filepath.Join(tp, "big"), make([]byte, 60<<10), 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write and close past the capacity: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(tp, "keep")); err != nil || len(b) != len(keep) {
		t.Fatalf("stored file after ENOSPC: %d bytes, %v", len(b), err)
	}
	st, err := nc.NodeGetVolumeStats(ctx, &csipb.NodeGetVolumeStatsRequest{VolumeId: vol.Volume.VolumeId, VolumePath: tp})
	if err != nil {
		t.Fatal(err)
	}
	if u := st.Usage[0]; u.Total != 100<<10 || u.Used < 60<<10 || u.Used >= 100<<10 {
		t.Fatalf("stats: %+v", u)
	}
	// df in the pod shows the volume's capacity.
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(tp, &sfs); err != nil {
		t.Fatal(err)
	}
	if got := uint64(sfs.Blocks) * uint64(sfs.Bsize); got != 100<<10 {
		t.Fatalf("statfs of the volume: %d bytes in all, want %d", got, 100<<10)
	}
	// Expanding lets the write through.
	if _, err := cc.ControllerExpandVolume(ctx, &csipb.ControllerExpandVolumeRequest{VolumeId: vol.Volume.VolumeId, CapacityRange: &csipb.CapacityRange{RequiredBytes: 200 << 10}}); err != nil {
		t.Fatal(err)
	}
	writeSync(t, filepath.Join(tp, "big2"), make([]byte, 60<<10), nil)
}

// writeSync writes a file and fsyncs it, expecting want (nil: success) from
// the write, the fsync or the close.
func writeSync(t *testing.T, p string, data []byte, want error) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
		t.Fatalf("write %s: %v, want %v", p, err, want)
	}
}

// TestRestartRemounts: a node plugin killed with -9 leaves dead FUSE
// mounts; the next one finds them from its state files, detaches them and
// mounts again, and the pod's path works again with the data in place.
func TestRestartRemounts(t *testing.T) {
	needFUSE(t)
	ctx := context.Background()
	filer, fg := startFiler(t)
	state := t.TempDir()
	sock := filepath.Join(t.TempDir(), "child.sock")
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "KELP_CSI_CHILD=1", "KELP_CSI_FILER="+filer, "KELP_CSI_FILER_GRPC="+fg, "KELP_CSI_STATE="+state, "KELP_CSI_SOCK="+sock)
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	conn := dial(t, sock)
	cc, nc := csipb.NewControllerClient(conn), csipb.NewNodeClient(conn)
	// WaitForReady: the child opens its socket when it is ready.
	vol, err := cc.CreateVolume(ctx, &csipb.CreateVolumeRequest{Name: "pvc-r", VolumeCapabilities: []*csipb.VolumeCapability{mountCap}}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	id := vol.Volume.VolumeId
	base := t.TempDir()
	staging, tp := filepath.Join(base, "staging"), filepath.Join(base, "pod", "mount")
	t.Cleanup(func() { unmount(tp); unmount(staging) }) // should the test stop half-way
	if _, err := nc.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: mountCap}); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: tp, VolumeCapability: mountCap}); err != nil {
		t.Fatal(err)
	}
	writeSync(t, filepath.Join(tp, "before"), []byte("hello"), nil)
	child.Process.Kill()
	child.Wait()
	if _, err := os.Stat(filepath.Join(tp, "before")); !errors.Is(err, syscall.ENOTCONN) {
		t.Logf("after the kill the mount answers %v (expected ENOTCONN)", err)
	}
	// The successor restores the mounts at start.
	sock2, _ := startDriver(t, Config{Filer: filer, FilerGRPC: fg, NodeID: "n1", Controller: true, Node: true, StateDir: state, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	nc2 := csipb.NewNodeClient(dial(t, sock2))
	// The plugin serves once its mounts are restored.
	if _, err := nc2.NodeGetInfo(ctx, &csipb.NodeGetInfoRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(tp, "before"))
	if err != nil || string(b) != "hello" {
		t.Fatalf("after restart: %q %v", b, err)
	}
	writeSync(t, filepath.Join(tp, "after"), []byte("again"), nil)
	if _, err := nc2.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: tp}); err != nil {
		t.Fatal(err)
	}
	if _, err := nc2.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); err != nil {
		t.Fatal(err)
	}
	if isMountPoint(tp) || isMountPoint(staging) {
		t.Fatal("still mounted after unpublish and unstage")
	}
	if _, err := os.Stat(filepath.Join(state, id+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("state file after unstage: %v", err)
	}
}
