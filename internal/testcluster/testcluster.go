// Package testcluster starts a whole Kelp cluster inside one test process: masters
// and volume servers in chosen data centers and racks, on real loopback ports, with
// helpers to stop and restart any of them. Tests use it instead of subprocesses.
//
// With Options.Masters > 1 the masters form a raft group on loopback (HTTP port p,
// gRPC p+10000, raft p+20000); every volume server is given every master's address.
//
// Only tests import it.
package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/master"
	"github.com/kelpfs/kelp/internal/pb"
	"github.com/kelpfs/kelp/internal/store"
	"github.com/kelpfs/kelp/internal/volumeserver"
)

// VolumeSpec places one volume server.
type VolumeSpec struct {
	DataCenter string
	Rack       string
	MaxVolumes int // per disk; 0 means 8
	Disks      int // 0 means 1
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
	Logger               *slog.Logger
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
	start            func() (runner, error)

	mu     sync.Mutex
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
	ports := make([]int, c.opts.Masters)
	var peers []string
	for i := range ports {
		ports[i] = freeMasterPort(t, ports[:i])
		if c.opts.Masters > 1 {
			peers = append(peers, addr(ports[i]))
		}
	}
	for i, port := range ports {
		mcfg := master.Config{
			IP:                   "127.0.0.1",
			Port:                 port,
			MetaDir:              filepath.Join(c.dir, fmt.Sprintf("master%d", i)),
			Peers:                peers,
			VolumeSizeLimit:      opts.VolumeSizeLimit,
			DefaultReplication:   opts.DefaultReplication,
			PulseInterval:        c.opts.PulseInterval,
			RaftHeartbeatTimeout: opts.RaftHeartbeatTimeout,
			Logger:               c.log.With("node", fmt.Sprintf("master%d", i)),
		}
		c.Masters = append(c.Masters, &Node{Addr: addr(port), start: func() (runner, error) { return master.New(mcfg) }})
	}
	c.Master = c.Masters[0]
	for i, spec := range opts.Volumes {
		c.Volume = append(c.Volume, c.volumeNode(i, spec))
	}
	t.Cleanup(c.Stop)
	for _, m := range c.Masters {
		m.Start(t)
	}
	c.Leader()
	for _, v := range c.Volume {
		v.Start(t)
	}
	c.WaitForVolumeServers(len(c.Volume))
	return c
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

func (c *Cluster) volumeNode(i int, spec VolumeSpec) *Node {
	port := FreePortPair(c.t)
	maxVolumes, disks := spec.MaxVolumes, spec.Disks
	if maxVolumes == 0 {
		maxVolumes = 8
	}
	if disks == 0 {
		disks = 1
	}
	cfg := volumeserver.Config{
		IP:              "127.0.0.1",
		Port:            port,
		Masters:         c.MasterAddrs(),
		DataCenter:      spec.DataCenter,
		Rack:            spec.Rack,
		Fsync:           c.opts.Fsync,
		VolumeSizeLimit: c.opts.VolumeSizeLimit,
		PulseInterval:   c.opts.PulseInterval,
		Logger:          c.log.With("node", fmt.Sprintf("volume%d", i)),
	}
	for d := 0; d < disks; d++ {
		cfg.Disks = append(cfg.Disks, store.DiskConfig{
			Dir:        filepath.Join(c.dir, fmt.Sprintf("volume%d", i), fmt.Sprintf("disk%d", d)),
			MaxVolumes: maxVolumes,
		})
	}
	return &Node{Addr: addr(port), DataCenter: spec.DataCenter, Rack: spec.Rack, start: func() (runner, error) { return volumeserver.New(cfg) }}
}

// Start runs the node (again).
func (n *Node) Start(t testing.TB) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv != nil {
		return
	}
	var srv runner
	var err error
	// A port just released by a stopped node can take a moment to be reusable.
	for i := 0; i < 50; i++ {
		if srv, err = n.start(); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("testcluster: start %s: %v", n.Addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.srv, n.cancel, n.done = srv, cancel, make(chan struct{})
	go func() { defer close(n.done); srv.Run(ctx) }()
	waitHealthy(t, n.Addr)
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
		if err := getJSON("http://"+c.Leader().Addr+"/cluster/status", &status); err == nil {
			if got = len(status.VolumeServers); got >= n {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("testcluster: master sees %d volume servers, want %d", got, n)
}

// FreePortPair finds a port p on 127.0.0.1 such that p and p+10000 (its gRPC
// port) are both free right now.
func FreePortPair(t testing.TB) int {
	t.Helper()
	for i := 0; i < 100; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		if p+pb.GRPCPortOffset > 65535 {
			ln.Close()
			continue
		}
		ln2, err := net.Listen("tcp", addr(p+pb.GRPCPortOffset))
		ln.Close()
		if err == nil {
			ln2.Close()
			return p
		}
	}
	t.Fatal("testcluster: no free port pair")
	return 0
}

// raftPortOffset is the master's raft port relative to its HTTP port (see
// internal/master).
const raftPortOffset = 20000

// freeMasterPort finds a port p such that p, p+10000 (gRPC) and p+20000
// (raft) are all free right now and p is not in taken.
func freeMasterPort(t testing.TB, taken []int) int {
	t.Helper()
	for i := 0; i < 500; i++ {
		p := FreePortPair(t)
		if p+raftPortOffset > 65535 || slices.Contains(taken, p) {
			continue
		}
		ln, err := net.Listen("tcp", addr(p+raftPortOffset))
		if err == nil {
			ln.Close()
			return p
		}
	}
	t.Fatal("testcluster: no free master port triple")
	return 0
}

func addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

func waitHealthy(t testing.TB, hostport string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + hostport + "/healthz")
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
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
