package master_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/master"
	"github.com/kelpfs/kelp/internal/pb"
	"github.com/kelpfs/kelp/internal/pb/masterpb"
	"github.com/kelpfs/kelp/internal/testcluster"
	"github.com/kelpfs/kelp/internal/testutil"
)

func haCluster(t *testing.T) *testcluster.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("three masters and volume servers: not in -short")
	}
	return testcluster.Start(t, testcluster.Options{
		Masters: 3,
		Volumes: []testcluster.VolumeSpec{
			{DataCenter: "dc1", Rack: "r1"}, {DataCenter: "dc1", Rack: "r2"},
		},
		VolumeSizeLimit: 64 << 20,
	})
}

func newClient(t *testing.T, c *testcluster.Cluster) *client.Client {
	t.Helper()
	cl, err := client.New(client.Config{Masters: c.MasterAddrs(), MaxRetries: 8})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func clusterStatus(t *testing.T, addr string) master.ClusterStatus {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/cluster/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var cs master.ClusterStatus
	if err := json.NewDecoder(resp.Body).Decode(&cs); err != nil {
		t.Fatal(err)
	}
	return cs
}

// checkStatus asserts that every running master shows every master with
// its role and the same single leader.
func checkStatus(t *testing.T, c *testcluster.Cluster, leader *testcluster.Node, down *testcluster.Node) {
	t.Helper()
	for _, m := range c.Masters {
		if m.Master() == nil {
			continue
		}
		cs := clusterStatus(t, m.Addr)
		if cs.Leader != leader.Addr || cs.IsLeader != (m == leader) || len(cs.Peers) != len(c.Masters) {
			t.Fatalf("status on %s: leader %q isLeader %v peers %+v; want leader %s", m.Addr, cs.Leader, cs.IsLeader, cs.Peers, leader.Addr)
		}
		for _, p := range cs.Peers {
			want := "follower"
			switch {
			case p.Address == leader.Addr:
				want = "leader"
			case down != nil && p.Address == down.Addr:
				want = "unreachable"
			}
			if p.Role != want {
				t.Fatalf("status on %s: %s has role %q, want %q (%+v)", m.Addr, p.Address, p.Role, want, cs.Peers)
			}
		}
	}
}

func TestFollowersForwardAssignAndLookup(t *testing.T) {
	c := haCluster(t)
	leader := c.Leader()
	checkStatus(t, c, leader, nil)
	seen := map[string]bool{}
	for _, f := range c.Followers() {
		// A client that only knows one follower still gets file ids: the
		// follower proxies to the leader.
		cl, err := client.New(client.Config{Masters: []string{f.Addr}})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			a, err := cl.Assign(context.Background(), client.AssignRequest{})
			if err != nil {
				t.Fatalf("assign through follower %s: %v", f.Addr, err)
			}
			if seen[a.FID.String()] {
				t.Fatalf("file id %s handed out twice", a.FID)
			}
			seen[a.FID.String()] = true
			locs, err := cl.Lookup(context.Background(), a.FID.Volume)
			if err != nil || len(locs) != 1 || locs[0].URL != a.URL {
				t.Fatalf("lookup through follower: %+v %v (assigned to %s)", locs, err, a.URL)
			}
		}
	}
}

// TestLeaderKilledDuringWrites: writes continue across the loss of the
// leader, every acknowledged write is readable, and the old leader rejoins
// as a follower with the group's state.
func TestLeaderKilledDuringWrites(t *testing.T) {
	c := haCluster(t)
	cl := newClient(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	type written struct {
		id   fid.FileID
		data []byte
	}
	var mu sync.Mutex
	var acked []written
	var lastAck time.Time
	var failures int
	var wg sync.WaitGroup
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				data := []byte(fmt.Sprintf("writer %d file %d", g, i))
				putStart := time.Now()
				id, _, err := cl.PutBytes(ctx, client.AssignRequest{}, data, client.UploadOptions{})
				if d := time.Since(putStart); d > 500*time.Millisecond {
					t.Logf("slow put: %v %v %v", d, id, err)
				}
				mu.Lock()
				if err == nil {
					acked = append(acked, written{id, data})
					lastAck = time.Now()
				} else if ctx.Err() == nil {
					failures++
				}
				mu.Unlock()
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	waitCount := func(n int, within time.Duration) time.Duration {
		start := time.Now()
		for count() < n {
			if time.Since(start) > within {
				t.Fatalf("only %d writes acknowledged, want %d", count(), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
		return time.Since(start)
	}
	t.Logf("first 50 writes in %v", waitCount(50, 10*time.Second))
	// The followers have mirrored the leader's topology after the initial
	// growth, as they have in a cluster that has run for a while.
	c.WaitMirrored()

	stopAt := time.Now()
	killed := c.KillLeader()
	killedAt := time.Now()
	t.Logf("kill took %v", killedAt.Sub(stopAt))
	before := count()
	t.Logf("first write after the kill within %v", waitCount(before+1, 10*time.Second))
	resumed := waitCount(before+50, 10*time.Second)
	t.Logf("leader %s killed; %d more writes acknowledged within %v", killed.Addr, 50, resumed)
	newLeader := c.Leader()
	if newLeader == killed {
		t.Fatal("the stopped master leads")
	}
	checkStatus(t, c, newLeader, killed)

	killed.Start(t)
	rs := time.Now()
	testutil.WaitFor(t, 10*time.Second, func() bool { return killed.Master().Leader() != "" }, "restarted %s never learnt the leader", killed.Addr)
	t.Logf("restarted %s knows the leader after %v", killed.Addr, time.Since(rs))
	cancel()
	wg.Wait()
	mu.Lock()
	t.Logf("%d writes acknowledged, %d failed; last ack %v after the kill", len(acked), failures, lastAck.Sub(killedAt))
	mu.Unlock()

	// Every acknowledged write is readable, with its bytes.
	keys := map[uint64]bool{}
	for _, w := range acked {
		if keys[w.id.Key] {
			t.Fatalf("file key %d handed out twice", w.id.Key)
		}
		keys[w.id.Key] = true
		rc, _, err := cl.Get(context.Background(), w.id, nil)
		if err != nil {
			t.Fatalf("read %s: %v", w.id, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, w.data) {
			t.Fatalf("read %s = %q, %v; want %q", w.id, got, err, w.data)
		}
	}

	// The old leader is back as a follower, caught up with the group.
	leader := c.Leader()
	if leader == killed {
		t.Fatal("the rejoined master took over")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ls, ks := leader.Master().RaftStats(), killed.Master().RaftStats()
		if ks.Role == "follower" && ks.AppliedIndex == ls.AppliedIndex && ks.Term == ls.Term {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rejoined master %+v, leader %+v", ks, ls)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ls, ks := clusterStatus(t, leader.Addr), clusterStatus(t, killed.Addr)
	if ks.MaxVolumeID != ls.MaxVolumeID || ks.DefaultReplication != ls.DefaultReplication {
		t.Fatalf("rejoined master state %d/%s, leader %d/%s", ks.MaxVolumeID, ks.DefaultReplication, ls.MaxVolumeID, ls.DefaultReplication)
	}
	checkStatus(t, c, leader, nil)
}

// TestFailoverTimes kills the leader abruptly (master.Server.Crash) a few
// times and measures the time to the first successful assign through any
// surviving master. Three rounds run by default, each bound to 5 s so that
// a loaded CI machine passes; KELP_FAILOVER_ROUNDS=N measures N rounds and
// holds them to the 2 s the design promises (run it on a quiet machine).
// KELP_RAFT_TIMEOUT (e.g. 300ms) overrides the raft heartbeat timeout.
//
//	KELP_FAILOVER_ROUNDS=20 go test -run TestFailoverTimes -v ./internal/master/
func TestFailoverTimes(t *testing.T) {
	if testing.Short() {
		t.Skip("three masters and volume servers: not in -short")
	}
	rounds, bound := 3, 5*time.Second
	if n, _ := strconv.Atoi(os.Getenv("KELP_FAILOVER_ROUNDS")); n > 0 {
		rounds, bound = n, 2*time.Second
	}
	timeout, _ := time.ParseDuration(os.Getenv("KELP_RAFT_TIMEOUT"))
	c := testcluster.Start(t, testcluster.Options{
		Masters:              3,
		Volumes:              []testcluster.VolumeSpec{{DataCenter: "dc1", Rack: "r1"}, {DataCenter: "dc1", Rack: "r2"}},
		RaftHeartbeatTimeout: timeout,
	})
	hc := &http.Client{Timeout: time.Second}
	assign := func(addr string) bool {
		resp, err := hc.Get("http://" + addr + "/dir/assign")
		if err != nil {
			return false
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	if !assign(c.Leader().Addr) {
		t.Fatal("first assign failed")
	}
	var times []time.Duration
	for r := 0; r < rounds; r++ {
		leader := c.Leader()
		// Start from a cluster whose followers mirror the leader, as in one
		// that has run for a while.
		c.WaitMirrored()
		var survivors []string
		for _, m := range c.Masters {
			if m != leader {
				survivors = append(survivors, m.Addr)
			}
		}
		start := time.Now()
		leader.Kill()
		assigned := func() bool { return slices.ContainsFunc(survivors, assign) }
		if !testutil.Eventually(20*time.Second, assigned) {
			t.Fatalf("round %d: no assign within 20s of killing the leader", r)
		}
		d := time.Since(start)
		times = append(times, d)
		t.Logf("round %d: leader %s killed; first assign after %v", r, leader.Addr, d)
		leader.Start(t)
	}
	slices.Sort(times)
	t.Logf("fail-over over %d rounds (raft timeout %v): median %v, worst %v, best %v",
		rounds, cmp.Or(timeout, 400*time.Millisecond), times[len(times)/2], times[len(times)-1], times[0])
	if worst := times[len(times)-1]; worst > bound {
		t.Errorf("worst fail-over %v is above %v", worst, bound)
	}
}

// TestAdminThroughFollowersSurvivesFailover: the admin calls work through
// any master, and a setting changed at run time outlives the leader (a new
// leader does not put its --default-replication flag back).
func TestAdminThroughFollowersSurvivesFailover(t *testing.T) {
	c := haCluster(t)
	f := c.Followers()[0]
	cc, err := grpc.NewClient(mustGRPC(t, f.Addr), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	mc := masterpb.NewMasterClient(cc)
	ctx := context.Background()
	l, err := mc.LeaseAdminLock(ctx, &masterpb.LeaseAdminLockRequest{Owner: "test"})
	if err != nil {
		t.Fatalf("lock through a follower: %v", err)
	}
	if _, err := mc.Configure(ctx, &masterpb.ConfigureRequest{LockToken: l.Token, Replication: "010"}); err != nil {
		t.Fatalf("configure through a follower: %v", err)
	}
	top, err := mc.Topology(ctx, &masterpb.TopologyRequest{})
	if err != nil || top.DefaultReplication != "010" || len(top.DataCenters) != 1 || len(top.DataCenters[0].Racks) != 2 {
		t.Fatalf("topology through a follower: %v %v", top, err)
	}
	cl := newClient(t, c)
	if _, err := cl.Assign(ctx, client.AssignRequest{}); err != nil { // grows 010 volumes
		t.Fatal(err)
	}
	c.WaitMirrored()
	killed := c.KillLeader()
	leader := c.Leader()
	a, err := cl.Assign(ctx, client.AssignRequest{})
	if err != nil {
		t.Fatalf("assign after fail-over: %v", err)
	}
	locs, err := cl.Lookup(ctx, a.FID.Volume)
	if err != nil || len(locs) != 2 || locs[0].Rack == locs[1].Rack {
		t.Fatalf("assign after fail-over did not use 010: %+v %v", locs, err)
	}
	killed.Start(t)
	if got := clusterStatus(t, leader.Addr).DefaultReplication; got != "010" {
		t.Fatalf("default replication after fail-over and rejoin = %q", got)
	}
	if _, err := mc.ReleaseAdminLock(ctx, &masterpb.ReleaseAdminLockRequest{Owner: "test", Token: l.Token}); err != nil {
		t.Fatalf("unlock after fail-over: %v", err)
	}
}

func mustGRPC(t *testing.T, httpAddr string) string {
	t.Helper()
	a, err := pb.GRPCAddress(httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
