// Package testcluster starts a whole Kelp cluster inside one test process: masters
// and volume servers in chosen data centers and racks, on real loopback ports, with
// helpers to stop, kill and restart any of them. Tests use it instead of subprocesses.
//
// Volume servers listen on ports the kernel picks (:0) and keep them across
// restarts. Masters follow the port convention (HTTP port p, gRPC p+10000,
// raft p+20000), which :0 cannot give: their ports are picked free below the
// ephemeral range and the masters start again on fresh ones if another test
// took one meanwhile. With Options.Masters > 1 the masters form a raft group
// on loopback; every volume server is given every master's address.
//
// Only tests import it.
package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/master"
	"github.com/kelpfs/kelp/internal/pb"
	"github.com/kelpfs/kelp/internal/security"
	"github.com/kelpfs/kelp/internal/store"
	"github.com/kelpfs/kelp/internal/testutil"
	"github.com/kelpfs/kelp/internal/testutil/netcut"
	"github.com/kelpfs/kelp/internal/volumeserver"
)

// VolumeSpec places one volume server.
type VolumeSpec struct {
	DataCenter string
	Rack       string
	MaxVolumes int // per disk; 0 means 8
	Disks      int // 0 means 1
	// NoLocalReads turns the server's Unix socket for readers on this
	// host off (volumeserver.Config.NoLocalReads).
	NoLocalReads bool
}

// Options shape the cluster.
type Options struct {
	// Masters is the size of the master raft group; 0 means 1.
	Masters         int
	Volumes         []VolumeSpec
	Fsync           bool
	VolumeSizeLimit int64 // 0 means the master's default
	// DefaultReplication is the masters' --default-replication; "" means 000.
	DefaultReplication string
	// PulseInterval is the masters' heartbeat interval (a volume server silent
	// for 3 is dropped) and the volume servers' pulse; 0 means 1s.
	PulseInterval time.Duration
	// RaftHeartbeatTimeout is the masters' raft timeout; 0 means the master's
	// default (400ms).
	RaftHeartbeatTimeout time.Duration
	// EcRebuildAfter and RunShell: the masters' automatic EC rebuild
	// (master.Config); tests of package shell pass their shell.
	EcRebuildAfter time.Duration
	RunShell       func(ctx context.Context, addr, owner string, out io.Writer, script string) error
	// ReplaceAfter is the masters' Config.ReplaceAfter; 0 means the default.
	ReplaceAfter time.Duration
	// RaftNetwork, when set, carries the masters' Raft traffic, so a test
	// can partition them (PartitionMaster); plain TCP, not under TLS.
	RaftNetwork *netcut.Network
	// PeerNetwork, when set, carries the traffic between volume servers
	// (forwarded writes, catch-up), so a test can cut one off from the
	// others (PartitionVolume) while clients and masters still reach it.
	PeerNetwork *netcut.Network
	// MasterNetwork, when set, carries the traffic between masters and
	// volume servers (heartbeats, lookups, the admin API, catch-up
	// requests), so a test can cut a volume server off from the masters
	// alone (CutFromMasters) while clients and the other volume servers
	// still reach it.
	MasterNetwork *netcut.Network
	Logger        *slog.Logger
	// Signer turns signed file ids on (masters and volume servers);
	// ReadSigner signed reads (volume servers).
	Signer, ReadSigner *auth.Signer
	// Access makes each master's mutating API need an access token, as
	// kelp master does with a signing key or a tokens file: an
	// auth.NewAccess(AccessTokens, Signer) per master, as separate
	// processes have. AccessTokens is a tokens file ("NAME ROLE TOKEN"
	// lines) or ""; MasterAccessToken the masters' Config.AccessToken.
	Access            bool
	AccessTokens      string
	MasterAccessToken string
	// AdminUI is the masters' Config.AdminUI (tests of internal/adminui).
	AdminUI func(*master.Server) http.Handler
	// GenerateAdminCredential is the masters' Config.GenerateAdminCredential.
	GenerateAdminCredential func(user, password, file string)
}

// Cluster is a running in-process cluster.
type Cluster struct {
	t    testing.TB
	dir  string
	opts Options
	log  *slog.Logger
	// Master is the first master (with one master, the master). Use Leader
	// for the one leading now.
	Master  *Node
	Masters []*Node
	Volume  []*Node
}

// Node is one server of the cluster that can be stopped and started again with
// the same ports and directories.
type Node struct {
	Addr string // HTTP host:port
	// DataCenter and Rack place a volume server; empty for masters.
	DataCenter, Rack string
	// Dirs are a volume server's disk directories.
	Dirs  []string
	start func() (runner, error)

	mu     sync.Mutex
	ran    bool // started before: its ports are its own
	cancel context.CancelFunc
	done   chan struct{}
	srv    runner
}

type runner interface {
	Run(ctx context.Context) error
	Close() error
}

// InProcessHTTPClient returns an HTTP client that reaches the cluster's
// running volume servers by calling their handlers in process, as the filer
// of `kelp server` reaches its own volume server (client.Loopback). Servers
// restarted later are reached over the network.
func (c *Cluster) InProcessHTTPClient() *http.Client {
	handlers := map[string]http.Handler{}
	for _, n := range c.Volume {
		n.mu.Lock()
		if h, ok := n.srv.(interface{ Handler() http.Handler }); ok {
			handlers[n.Addr] = h.Handler()
		}
		n.mu.Unlock()
	}
	return &http.Client{Transport: &client.Loopback{Handlers: handlers, Next: client.NewHTTPClient().Transport}}
}

// Start launches the masters and the volume servers and waits until a master
// leads and every volume server has reported to it. Everything stops when the
// test ends.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	c := &Cluster{t: t, dir: t.TempDir(), opts: opts, log: opts.Logger}
	if c.log == nil {
		c.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.opts.Masters <= 0 {
		c.opts.Masters = 1
	}
	if c.opts.PulseInterval == 0 {
		c.opts.PulseInterval = time.Second
	}
	t.Cleanup(c.Stop)
	c.startMasters()
	c.Master = c.Masters[0]
	for i, spec := range opts.Volumes {
		v := c.volumeNode(i, spec)
		c.Volume = append(c.Volume, v)
		v.Start(t)
	}
	c.WaitForVolumeServers(len(c.Volume))
	return c
}

// startMasters starts the masters on fresh ports and waits for a leader.
// Their ports follow the convention (gRPC +10000, raft +20000), so they are
// picked free and bound a moment later (see testutil.FreePort); when another
// test took one in between, every master starts again on fresh ports and
// empty directories.
func (c *Cluster) startMasters() {
	c.t.Helper()
	for attempt := 0; ; attempt++ {
		ports := testutil.FreePorts(c.t, c.opts.Masters, pb.GRPCPortOffset, pb.RaftPortOffset)
		c.Masters = nil
		var peers []string
		for _, p := range ports {
			if c.opts.Masters > 1 {
				peers = append(peers, addr(p))
			}
		}
		for i, port := range ports {
			c.Masters = append(c.Masters, c.masterNode(i, port, peers))
		}
		err := c.tryStartMasters()
		if err == nil {
			c.Leader()
			return
		}
		for _, m := range c.Masters {
			m.Stop()
		}
		if attempt == 5 || !testutil.AddrInUse(err) {
			c.t.Fatalf("testcluster: %v", err)
		}
		c.t.Logf("testcluster: %v; starting the masters again on fresh ports", err)
	}
}

func (c *Cluster) tryStartMasters() error {
	for _, m := range c.Masters {
		if err := m.tryStart(c.t); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) masterNode(i, port int, peers []string) *Node {
	dir := filepath.Join(c.dir, fmt.Sprintf("master%d", i))
	os.RemoveAll(dir) // left by an attempt on other ports
	mcfg := master.Config{
		Signer:                  c.opts.Signer,
		ReadSigner:              c.opts.ReadSigner,
		IP:                      "127.0.0.1",
		Port:                    port,
		MetaDir:                 dir,
		Peers:                   peers,
		VolumeSizeLimit:         c.opts.VolumeSizeLimit,
		DefaultReplication:      c.opts.DefaultReplication,
		PulseInterval:           c.opts.PulseInterval,
		RaftHeartbeatTimeout:    c.opts.RaftHeartbeatTimeout,
		EcRebuildAfter:          c.opts.EcRebuildAfter,
		RunShell:                c.opts.RunShell,
		ReplaceAfter:            c.opts.ReplaceAfter,
		AdminUI:                 c.opts.AdminUI,
		GenerateAdminCredential: c.opts.GenerateAdminCredential,
		AccessToken:             c.opts.MasterAccessToken,
		Logger:                  c.log.With("node", fmt.Sprintf("master%d", i)),
	}
	if mn := c.opts.MasterNetwork; mn != nil {
		id := fmt.Sprintf("master%d", i)
		mn.Add(id, addr(port))
		mn.Add(id, addr(pb.DerivedPort(port, pb.GRPCPortOffset)))
		mcfg.VolumeDial = mn.ContextDialer(id)
	}
	if rn := c.opts.RaftNetwork; rn != nil {
		raft := raftAddr(port)
		rn.Add(raft, raft)
		mcfg.RaftDial = rn.Dialer(raft)
	}
	return &Node{Addr: addr(port), start: func() (runner, error) {
		cfg := mcfg
		if c.opts.Access {
			a, err := auth.NewAccess(c.opts.AccessTokens, c.opts.Signer)
			if err != nil {
				return nil, err
			}
			cfg.Access = a
		}
		return master.New(cfg)
	}}
}

// MasterAddrs are the HTTP addresses of every master, in order.
func (c *Cluster) MasterAddrs() []string {
	out := make([]string, len(c.Masters))
	for i, m := range c.Masters {
		out[i] = m.Addr
	}
	return out
}

// Leader waits (up to 10s) until a running master leads and every running
// master agrees on it, and returns it. It fails the test otherwise.
func (c *Cluster) Leader() *Node {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if l := c.agreedLeader(); l != nil {
			return l
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatalf("testcluster: no agreed master leader within 10s")
	return nil
}

func (c *Cluster) agreedLeader() *Node {
	var leader *Node
	for _, m := range c.Masters {
		if ms := m.Master(); ms != nil && ms.IsLeader() {
			leader = m
		}
	}
	if leader == nil {
		return nil
	}
	for _, m := range c.Masters {
		if ms := m.Master(); ms != nil && ms.Leader() != leader.Addr {
			return nil
		}
	}
	return leader
}

// Followers are the running masters that do not lead (after waiting for a
// leader).
func (c *Cluster) Followers() []*Node {
	c.t.Helper()
	l := c.Leader()
	var out []*Node
	for _, m := range c.Masters {
		if m != l && m.Master() != nil {
			out = append(out, m)
		}
	}
	return out
}

// StopLeader stops the leading master and returns it; Start brings it back.
func (c *Cluster) StopLeader() *Node {
	c.t.Helper()
	l := c.Leader()
	l.Stop()
	return l
}

// KillLeader kills the leading master as a crash would (see Node.Kill) and
// returns it; Start brings it back.
func (c *Cluster) KillLeader() *Node {
	c.t.Helper()
	l := c.Leader()
	l.Kill()
	return l
}

// WaitMirrored waits until every running follower lists the leader's volume
// servers with as many volumes each, as a cluster that has run for a while
// does (followers copy the leader's topology on a timer). A fail-over test
// starts from there.
func (c *Cluster) WaitMirrored() {
	c.t.Helper()
	view := func(m *Node) (map[string]int, error) {
		var status struct {
			VolumeServers []struct {
				URL     string `json:"url"`
				Volumes int    `json:"volumes"`
			} `json:"volumeServers"`
		}
		if err := getJSON(security.URL(m.Addr)+"/cluster/status", &status); err != nil {
			return nil, err
		}
		out := map[string]int{}
		for _, v := range status.VolumeServers {
			out[v.URL] = v.Volumes
		}
		return out, nil
	}
	var last string
	mirrored := func() bool {
		want, err := view(c.Leader())
		if err != nil {
			last = err.Error()
			return false
		}
		for _, f := range c.Followers() {
			got, err := view(f)
			if err != nil || !maps.Equal(got, want) {
				last = fmt.Sprintf("follower %s has %v (%v), the leader %v", f.Addr, got, err, want)
				return false
			}
		}
		return true
	}
	if !testutil.Eventually(20*time.Second, mirrored) {
		c.t.Fatalf("testcluster: followers never mirrored the leader: %s", last)
	}
}

// VolumesIn returns the volume servers of a data center, of one rack in it
// when rack is not empty.
func (c *Cluster) VolumesIn(dataCenter, rack string) []*Node {
	var out []*Node
	for _, v := range c.Volume {
		if v.DataCenter == dataCenter && (rack == "" || v.Rack == rack) {
			out = append(out, v)
		}
	}
	return out
}

// StopRack stops every volume server of a rack (all racks of the data center
// when rack is empty), in parallel, and returns them.
func (c *Cluster) StopRack(dataCenter, rack string) []*Node {
	nodes := c.VolumesIn(dataCenter, rack)
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.Stop() }()
	}
	wg.Wait()
	return nodes
}

// StartRack starts the volume servers of a rack (a whole data center when
// rack is empty) again and waits until the leader sees all running volume
// servers.
func (c *Cluster) StartRack(dataCenter, rack string) {
	c.t.Helper()
	for _, n := range c.VolumesIn(dataCenter, rack) {
		n.Start(c.t)
	}
	c.WaitForVolumeServers(c.runningVolumes())
}

// CrashDataCenter crashes every volume server of a data center at once (see
// Node.Crash) and returns them.
func (c *Cluster) CrashDataCenter(dataCenter string) []*Node {
	nodes := c.VolumesIn(dataCenter, "")
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.Crash() }()
	}
	wg.Wait()
	return nodes
}

// StopDataCenter stops every volume server of a data center.
func (c *Cluster) StopDataCenter(dataCenter string) []*Node { return c.StopRack(dataCenter, "") }

// StartDataCenter starts a data center's volume servers again.
func (c *Cluster) StartDataCenter(dataCenter string) { c.StartRack(dataCenter, "") }

func (c *Cluster) runningVolumes() int {
	n := 0
	for _, v := range c.Volume {
		if v.Server() != nil {
			n++
		}
	}
	return n
}

// volumeNode returns a volume server that listens on ports the kernel picks
// when it first starts, and on the same ports when it starts again.
func (c *Cluster) volumeNode(i int, spec VolumeSpec) *Node {
	maxVolumes, disks := spec.MaxVolumes, spec.Disks
	if maxVolumes == 0 {
		maxVolumes = 8
	}
	if disks == 0 {
		disks = 1
	}
	cfg := volumeserver.Config{
		Signer:          c.opts.Signer,
		ReadSigner:      c.opts.ReadSigner,
		IP:              "127.0.0.1",
		Masters:         c.MasterAddrs(),
		DataCenter:      spec.DataCenter,
		Rack:            spec.Rack,
		Fsync:           c.opts.Fsync,
		VolumeSizeLimit: c.opts.VolumeSizeLimit,
		PulseInterval:   c.opts.PulseInterval,
		NoLocalReads:    spec.NoLocalReads,
		Logger:          c.log.With("node", fmt.Sprintf("volume%d", i)),
	}
	for d := 0; d < disks; d++ {
		cfg.Disks = append(cfg.Disks, store.DiskConfig{
			Dir:        filepath.Join(c.dir, fmt.Sprintf("volume%d", i), fmt.Sprintf("disk%d", d)),
			MaxVolumes: maxVolumes,
		})
	}
	n := &Node{DataCenter: spec.DataCenter, Rack: spec.Rack}
	for _, d := range cfg.Disks {
		n.Dirs = append(n.Dirs, d.Dir)
	}
	if pn := c.opts.PeerNetwork; pn != nil {
		cfg.PeerDial = pn.ContextDialer(volumeID(i))
	}
	if mn := c.opts.MasterNetwork; mn != nil {
		cfg.MasterDial = mn.ContextDialer(volumeID(i))
	}
	n.start = func() (runner, error) {
		v, err := volumeserver.New(cfg)
		if err != nil {
			return nil, err
		}
		if cfg.Port == 0 { // first start: keep the ports the kernel gave
			cfg.Port, cfg.GRPCPort = port(v.URL()), port(v.GRPCAddr())
			n.Addr = v.URL()
			if pn := c.opts.PeerNetwork; pn != nil {
				pn.Add(volumeID(i), n.Addr)
			}
			if mn := c.opts.MasterNetwork; mn != nil {
				mn.Add(volumeID(i), n.Addr)
				mn.Add(volumeID(i), v.GRPCAddr())
			}
		}
		return v, nil
	}
	return n
}

// volumeID names volume server i on the PeerNetwork.
func volumeID(i int) string { return fmt.Sprintf("volume%d", i) }

// PartitionVolume cuts volume server n off from the other volume servers
// (Options.PeerNetwork): its forwards and catch-ups, and theirs to it, fail;
// masters and clients still reach it. HealVolumes restores the links.
func (c *Cluster) PartitionVolume(n *Node) { c.opts.PeerNetwork.Isolate(c.volumeID(n)) }

// volumeID names volume server n on the cluster's networks.
func (c *Cluster) volumeID(n *Node) string {
	for i, v := range c.Volume {
		if v == n {
			return volumeID(i)
		}
	}
	c.t.Fatalf("testcluster: %s is not a volume server of this cluster", n.Addr)
	return ""
}

// HealVolumes restores every link between volume servers.
func (c *Cluster) HealVolumes() { c.opts.PeerNetwork.Heal() }

// CutFromMasters cuts volume server n off from every master
// (Options.MasterNetwork): its heartbeats and lookups fail, and so do the
// masters' calls to it; clients and the other volume servers still reach
// it. HealMasterLinks restores the links.
func (c *Cluster) CutFromMasters(n *Node) { c.opts.MasterNetwork.Isolate(c.volumeID(n)) }

// HealMasterLinks restores every link between masters and volume servers.
func (c *Cluster) HealMasterLinks() { c.opts.MasterNetwork.Heal() }

func port(hostport string) int {
	_, p, _ := net.SplitHostPort(hostport)
	n, _ := strconv.Atoi(p)
	return n
}

// Start runs the node (again) and waits until it answers.
func (n *Node) Start(t testing.TB) {
	t.Helper()
	if err := n.tryStart(t); err != nil {
		t.Fatalf("testcluster: start %s: %v", n.Addr, err)
	}
}

// restartRetry is how long a node started again keeps trying its ports: a
// test picking free ports (see testutil.FreePort) may hold one for a
// moment.
const restartRetry = 5 * time.Second

func (n *Node) tryStart(t testing.TB) error {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv != nil {
		return nil
	}
	srv, err := n.start()
	for deadline := time.Now().Add(restartRetry); testutil.AddrInUse(err) && n.ran && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		srv, err = n.start()
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.srv, n.cancel, n.done, n.ran = srv, cancel, make(chan struct{}), true
	go func() { defer close(n.done); srv.Run(ctx) }()
	waitHealthy(t, n.Addr)
	return nil
}

// Stop stops the node gracefully and waits until it has closed.
func (n *Node) Stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv == nil {
		return
	}
	n.cancel()
	<-n.done
	n.srv.Close()
	n.srv = nil
}

// Kill stops a master as a crash would: raft stops leading at once without
// a word to the peers, and its connections are cut with no request
// finished (master.Server.Crash). Other nodes stop as with Stop; Crash
// kills any node.
func (n *Node) Kill() {
	n.stop(func(srv runner) bool { _, ok := srv.(*master.Server); return ok })
}

// Crash stops any node as kill -9 would: a master as with Kill, a volume
// server with every connection cut and its heartbeat stream broken rather
// than closed (volumeserver.Server.Crash), so that the master learns of it
// only as it would of a killed process.
func (n *Node) Crash() {
	n.stop(func(runner) bool { return true })
}

func (n *Node) stop(crash func(runner) bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv == nil {
		return
	}
	if m, ok := n.srv.(interface{ Crash() }); ok && crash(n.srv) {
		m.Crash()
	}
	n.cancel()
	<-n.done
	n.srv.Close()
	n.srv = nil
}

// Restart stops and starts the node.
func (n *Node) Restart(t testing.TB) {
	n.Stop()
	n.Start(t)
}

// Server is the running service (a *master.Server or *volumeserver.Server), nil when stopped.
func (n *Node) Server() any {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.srv
}

// Master is the running master, nil when the node is stopped or not a master.
func (n *Node) Master() *master.Server {
	m, _ := n.Server().(*master.Server)
	return m
}

// VolumeServer is the running volume server, nil when the node is stopped or
// not a volume server.
func (n *Node) VolumeServer() *volumeserver.Server {
	v, _ := n.Server().(*volumeserver.Server)
	return v
}

// Stop stops every node: volume servers first, in parallel, then masters.
func (c *Cluster) Stop() {
	var wg sync.WaitGroup
	for _, v := range c.Volume {
		wg.Add(1)
		go func() { defer wg.Done(); v.Stop() }()
	}
	wg.Wait()
	for _, m := range c.Masters {
		wg.Add(1)
		go func() { defer wg.Done(); m.Stop() }()
	}
	wg.Wait()
}

// RestartAll stops every node, then starts them all again and waits for the
// volume servers to report.
func (c *Cluster) RestartAll() {
	c.Stop()
	for _, m := range c.Masters {
		m.Start(c.t)
	}
	c.Leader()
	for _, v := range c.Volume {
		v.Start(c.t)
	}
	c.WaitForVolumeServers(len(c.Volume))
}

// WaitForVolumeServers waits until the leading master lists n volume servers.
func (c *Cluster) WaitForVolumeServers(n int) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var got int
	for time.Now().Before(deadline) {
		var status struct {
			VolumeServers []json.RawMessage `json:"volumeServers"`
		}
		if err := getJSON(security.URL(c.Leader().Addr)+"/cluster/status", &status); err == nil {
			if got = len(status.VolumeServers); got >= n {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("testcluster: master sees %d volume servers, want %d", got, n)
}

func addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// raftAddr is the Raft address of the master on HTTP port port.
func raftAddr(port int) string { return addr(pb.DerivedPort(port, pb.RaftPortOffset)) }

// PartitionMaster cuts master m's Raft links to every other master
// (Options.RaftNetwork must be set); HealMasters restores them.
func (c *Cluster) PartitionMaster(m *Node) {
	_, port, _ := net.SplitHostPort(m.Addr)
	p, _ := strconv.Atoi(port)
	c.opts.RaftNetwork.Isolate(raftAddr(p))
}

// HealMasters restores every Raft link between the masters.
func (c *Cluster) HealMasters() { c.opts.RaftNetwork.Heal() }

func waitHealthy(t testing.TB, hostport string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := httpGet(security.URL(hostport) + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("testcluster: %s never became healthy", hostport)
}

func getJSON(url string, v any) error {
	resp, err := httpGet(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// httpGet is http.Get with the process's TLS (security.Process).
func httpGet(url string) (*http.Response, error) {
	return (&http.Client{Transport: &http.Transport{TLSClientConfig: security.Process().ClientConfig(), DisableKeepAlives: true}}).Get(url)
}
