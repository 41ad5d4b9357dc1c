package master

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/pb/masterpb"
	"github.com/kelpfs/kelp/internal/replication"
)

func startMaster(t testing.TB, dir string, mutate ...func(*Config)) *Server {
	t.Helper()
	cfg := Config{
		IP: "127.0.0.1", MetaDir: dir, PulseInterval: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, m := range mutate {
		m(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return s
}

type assignJSON struct {
	Fid       string `json:"fid"`
	URL       string `json:"url"`
	PublicURL string `json:"publicUrl"`
	Count     uint64 `json:"count"`
	Error     string `json:"error"`
}

func getJSON(t testing.TB, method, u string, v any) int {
	t.Helper()
	req, _ := http.NewRequest(method, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("%s %s: %v in %q", method, u, err, body)
		}
	}
	return resp.StatusCode
}

func assignHTTP(t testing.TB, s *Server, query string) (assignJSON, int) {
	t.Helper()
	var a assignJSON
	code := getJSON(t, "GET", "http://"+s.HTTPAddr()+"/dir/assign?"+query, &a)
	return a, code
}

func TestAssignGrowsAndLooksUp(t *testing.T) {
	s := startMaster(t, t.TempDir())
	vs := newFakeVolumeServer(t, 18080, "dc1", "rack1", 10)
	vs.connect(s.GRPCAddr())

	a, code := assignHTTP(t, s, "")
	if code != 200 {
		t.Fatalf("assign: %d %+v", code, a)
	}
	if a.URL != vs.url() || a.PublicURL != vs.url() || a.Count != 1 {
		t.Fatalf("assign = %+v", a)
	}
	f, err := fid.Parse(a.Fid)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(vs.allocations()); got != 1 {
		t.Fatalf("growth allocated %d volumes, want 1 (the server has one disk)", got)
	}
	// Keys from count=N are consecutive and never reused.
	b, _ := assignHTTP(t, s, "count=5")
	c, _ := assignHTTP(t, s, "")
	fb, _ := fid.Parse(b.Fid)
	fc, _ := fid.Parse(c.Fid)
	if b.Count != 5 || fb.Key <= f.Key || fc.Key < fb.Key+5 {
		t.Fatalf("keys %d, %d (count 5), %d", f.Key, fb.Key, fc.Key)
	}

	for _, q := range []string{itoa(int(f.Volume)), a.Fid} {
		var lr lookupResponse
		if code := getJSON(t, "GET", "http://"+s.HTTPAddr()+"/dir/lookup?volumeId="+url.QueryEscape(q), &lr); code != 200 {
			t.Fatalf("lookup %s: %d", q, code)
		}
		if len(lr.Locations) != 1 || lr.Locations[0].URL != vs.url() || lr.Locations[0].DataCenter != "dc1" || lr.Locations[0].Rack != "rack1" {
			t.Fatalf("lookup %s = %+v", q, lr)
		}
	}
	var lr map[string]string
	if code := getJSON(t, "GET", "http://"+s.HTTPAddr()+"/dir/lookup?volumeId=999", &lr); code != 404 ||
		lr["volumeId"] != "999" || lr["error"] != "volume 999 not found" {
		t.Fatalf("unknown volume: %d %v", code, lr)
	}

	var cs ClusterStatus
	getJSON(t, "GET", "http://"+s.HTTPAddr()+"/cluster/status", &cs)
	if !cs.IsLeader || cs.Leader != s.HTTPAddr() || len(cs.Peers) != 1 || cs.Peers[0].Role != "leader" ||
		len(cs.VolumeServers) != 1 || cs.VolumeServers[0].Volumes != 1 || cs.VolumeServers[0].FreeSlots != 9 {
		t.Fatalf("cluster status = %+v", cs)
	}
	var ds struct {
		Topology struct {
			DataCenters []struct {
				Name  string `json:"name"`
				Racks []struct {
					Nodes []struct {
						URL string `json:"url"`
					} `json:"nodes"`
				} `json:"racks"`
			} `json:"dataCenters"`
		} `json:"topology"`
	}
	getJSON(t, "GET", "http://"+s.HTTPAddr()+"/dir/status", &ds)
	if len(ds.Topology.DataCenters) != 1 || ds.Topology.DataCenters[0].Name != "dc1" ||
		ds.Topology.DataCenters[0].Racks[0].Nodes[0].URL != vs.url() {
		t.Fatalf("dir status = %+v", ds)
	}
}

func TestConcurrentAssignsGrowOnce(t *testing.T) {
	s := startMaster(t, t.TempDir())
	vs := newFakeVolumeServer(t, 18081, "", "", 30)
	vs.connect(s.GRPCAddr())
	var wg sync.WaitGroup
	fids := make([]string, 16)
	for i := range fids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, code := assignHTTP(t, s, "collection=pics")
			if code != 200 {
				t.Errorf("assign: %d %+v", code, a)
			}
			fids[i] = a.Fid
		}()
	}
	wg.Wait()
	if got := len(vs.allocations()); got != 1 {
		t.Fatalf("16 concurrent assigns allocated %d volumes, want one growth of 1", got)
	}
	seen := map[uint64]bool{}
	for _, f := range fids {
		id, err := fid.Parse(f)
		if err != nil || seen[id.Key] {
			t.Fatalf("fid %q: %v (dup=%v)", f, err, seen[id.Key])
		}
		seen[id.Key] = true
	}
}

func TestReplicatedGrowthAndPlacementErrors(t *testing.T) {
	s := startMaster(t, t.TempDir())
	a := newFakeVolumeServer(t, 18082, "dc1", "rack1", 10)
	b := newFakeVolumeServer(t, 18083, "dc1", "rack1", 10)
	a.connect(s.GRPCAddr())
	b.connect(s.GRPCAddr())

	r, code := assignHTTP(t, s, "replication=001")
	if code != 200 {
		t.Fatalf("assign 001: %d %+v", code, r)
	}
	if len(a.allocations()) != 1 || len(b.allocations()) != 1 { // two disks, two copies: one volume
		t.Fatalf("001 growth allocations: %v / %v", a.allocations(), b.allocations())
	}
	f, _ := fid.Parse(r.Fid)
	var lr lookupResponse
	getJSON(t, "GET", "http://"+s.HTTPAddr()+"/dir/lookup?volumeId="+itoa(int(f.Volume)), &lr)
	if len(lr.Locations) != 2 {
		t.Fatalf("replicated volume locations = %+v", lr)
	}

	r, code = assignHTTP(t, s, "replication=010")
	if code != 503 || !strings.Contains(r.Error, "replication 010 needs 2 racks with free slots in one data center") {
		t.Fatalf("assign 010: %d %q", code, r.Error)
	}
	r, code = assignHTTP(t, s, "replication=100")
	if code != 503 || !strings.Contains(r.Error, "replication 100 needs 2 data centers with free slots; only dc1 has one") {
		t.Fatalf("assign 100: %d %q", code, r.Error)
	}

	var grown struct {
		Count     int      `json:"count"`
		VolumeIDs []uint32 `json:"volumeIds"`
	}
	if code := getJSON(t, "POST", "http://"+s.HTTPAddr()+"/vol/grow?collection=c&replication=001&count=2", &grown); code != 200 || grown.Count != 2 {
		t.Fatalf("vol/grow: %d %+v", code, grown)
	}
	if got := len(a.allocations()); got != 3 {
		t.Fatalf("after manual growth a has %d volumes, want 3", got)
	}
}

func TestNoVolumeServerIs503(t *testing.T) {
	s := startMaster(t, t.TempDir())
	r, code := assignHTTP(t, s, "")
	if code != 503 || !strings.Contains(r.Error, "no volume servers are connected") {
		t.Fatalf("assign without volume servers: %d %q", code, r.Error)
	}
}

func TestBadParameters(t *testing.T) {
	s := startMaster(t, t.TempDir())
	for _, q := range []string{"replication=9x", "ttl=5q", "count=abc", "count=0", "count=99999999999",
		"collection=..%2Fx", "collection=a%2Fb", "collection=..", "collection=a%5Cb", "collection=a%00b", "collection=" + strings.Repeat("c", 201)} {
		r, code := assignHTTP(t, s, q)
		if code != 400 || r.Error == "" {
			t.Errorf("assign?%s: %d %+v", q, code, r)
		}
	}
	var lr lookupResponse
	if code := getJSON(t, "GET", "http://"+s.HTTPAddr()+"/dir/lookup?volumeId=abc", &lr); code != 400 || lr.Error == "" {
		t.Errorf("lookup abc: %d %+v", code, lr)
	}
	req, _ := http.NewRequest("DELETE", "http://"+s.HTTPAddr()+"/dir/assign", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("DELETE /dir/assign: %d", resp.StatusCode)
	}
	resp, err = http.Get("http://" + s.HTTPAddr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Errorf("healthz: %d %q", resp.StatusCode, body)
	}
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

func TestNodeDeath(t *testing.T) {
	s := startMaster(t, t.TempDir()) // pulse 100ms: dead after 300ms
	crash := newFakeVolumeServer(t, 18084, "", "", 5)
	leave := newFakeVolumeServer(t, 18085, "", "", 5)
	crash.connect(s.GRPCAddr())
	leave.connect(s.GRPCAddr())
	if n := len(s.topo.Nodes(false)); n != 2 {
		t.Fatalf("%d nodes", n)
	}

	leave.closeStream()
	waitFor(t, 100*time.Millisecond, "clean close drops the node at once", func() bool { return len(s.topo.Nodes(false)) == 1 })

	crash.breakStream()
	broken := time.Now()
	waitFor(t, 2*time.Second, "dead node dropped", func() bool { return len(s.topo.Nodes(false)) == 0 })
	// A broken stream is not a goodbye: the node stays until the dead
	// timeout (three pulses of 100ms) from its last heartbeat, at most a
	// pulse before the break, as a node on a network that hiccups must.
	if d := time.Since(broken); d < 150*time.Millisecond {
		t.Fatalf("broken stream dropped the node after %v, before the dead timeout", d)
	}
	if _, code := assignHTTP(t, s, ""); code != 503 {
		t.Fatalf("assign with dead cluster: %d", code)
	}
}

func TestRestartKeepsFileIDsUnique(t *testing.T) {
	dir := t.TempDir()
	vs := newFakeVolumeServer(t, 18086, "", "", 40)
	seen := map[string]bool{}
	var maxKey uint64
	var maxVol uint32
	for round := 0; round < 3; round++ {
		s, err := New(Config{MetaDir: dir, PulseInterval: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		vs.connect(s.GRPCAddr())
		for i := 0; i < 20; i++ {
			a, code := assignHTTP(t, s, "count=3")
			if code != 200 {
				t.Fatalf("round %d: %d %+v", round, code, a)
			}
			f, _ := fid.Parse(a.Fid)
			for k := f.Key; k < f.Key+3; k++ {
				id := itoa(int(f.Volume)) + "/" + itoa(int(k))
				if seen[id] || k <= maxKey && i == 0 {
					t.Fatalf("round %d: key %s reused (max before restart %d)", round, id, maxKey)
				}
				seen[id] = true
				maxKey = max(maxKey, k)
			}
		}
		// Force a growth in a new layout: its ids must be new too.
		r, code := assignHTTP(t, s, "collection=round"+itoa(round))
		if code != 200 {
			t.Fatalf("grow: %d %+v", code, r)
		}
		f, _ := fid.Parse(r.Fid)
		if f.Volume <= maxVol {
			t.Fatalf("round %d: volume %d not above %d", round, f.Volume, maxVol)
		}
		for _, v := range vs.allocations() {
			maxVol = max(maxVol, v)
		}
		vs.breakStream()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	ids := vs.allocations()
	uniq := map[uint32]bool{}
	for _, v := range ids {
		if uniq[v] {
			t.Fatalf("volume id %d allocated twice: %v", v, ids)
		}
		uniq[v] = true
	}
}

func TestGRPCAPI(t *testing.T) {
	s := startMaster(t, t.TempDir())
	vs := newFakeVolumeServer(t, 18087, "dc2", "r9", 10)
	vs.connect(s.GRPCAddr())
	cc, err := grpc.NewClient(s.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := masterpb.NewMasterClient(cc)
	ctx := context.Background()
	a, err := c.Assign(ctx, &masterpb.AssignRequest{Count: 2, DataCenter: "dc2"})
	if err != nil || a.Url != vs.url() || a.Count != 2 {
		t.Fatalf("Assign = %v, %v", a, err)
	}
	f, _ := fid.Parse(a.Fid)
	l, err := c.Lookup(ctx, &masterpb.LookupRequest{VolumeIds: []uint32{f.Volume, 9999}})
	if err != nil || len(l.Volumes) != 2 || len(l.Volumes[0].Locations) != 1 || l.Volumes[0].Locations[0].Rack != "r9" ||
		l.Volumes[1].Error != "volume 9999 not found" {
		t.Fatalf("Lookup = %v, %v", l, err)
	}
	if _, err := c.Assign(ctx, &masterpb.AssignRequest{Replication: "bad"}); err == nil || !strings.Contains(err.Error(), "InvalidArgument") {
		t.Fatalf("bad replication over gRPC: %v", err)
	}
	st, err := c.ClusterStatus(ctx, &masterpb.ClusterStatusRequest{})
	var cs ClusterStatus
	if err != nil || json.Unmarshal(st.Json, &cs) != nil || !cs.IsLeader || len(cs.VolumeServers) != 1 {
		t.Fatalf("ClusterStatus = %s, %v", st.GetJson(), err)
	}
}

func TestErrorTable(t *testing.T) {
	if httpStatus(errors.New("x")) != 500 || httpStatus(ErrBadRequest) != 400 {
		t.Fatal("error table")
	}
}

func TestGrowCountFollowsDisks(t *testing.T) {
	for _, c := range []struct {
		code  string
		disks int
		want  int
	}{
		{"000", 0, 1}, {"000", 1, 1}, {"000", 3, 3}, {"000", 20, 7},
		{"001", 1, 1}, {"001", 2, 1}, {"001", 5, 2}, {"001", 40, 6},
		{"011", 3, 1}, {"011", 30, 3},
	} {
		code, _ := replication.Parse(c.code)
		if got := growCount(code, c.disks); got != c.want {
			t.Errorf("growCount(%s, %d disks) = %d, want %d", c.code, c.disks, got, c.want)
		}
	}
}
