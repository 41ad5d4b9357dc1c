package master

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/consensus"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/pb/masterpb"
	"github.com/kelpfs/kelp/internal/testutil"
)

func grpcClient(t *testing.T, s *Server) masterpb.MasterClient {
	t.Helper()
	cc, err := grpc.NewClient(s.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return masterpb.NewMasterClient(cc)
}

func postForm(t *testing.T, s *Server, path string, form url.Values, v any) int {
	t.Helper()
	return getJSON(t, "POST", "http://"+s.HTTPAddr()+path+"?"+form.Encode(), v)
}

func TestAdminLockAndConfigureChangeAssignAtRunTime(t *testing.T) {
	s := startMaster(t, t.TempDir())
	a := newFakeVolumeServer(t, 18090, "dc1", "rack1", 20)
	b := newFakeVolumeServer(t, 18091, "dc1", "rack1", 20)
	a.connect(s.GRPCAddr())
	b.connect(s.GRPCAddr())
	c := grpcClient(t, s)
	ctx := context.Background()

	// Configure needs the lock.
	if _, err := c.Configure(ctx, &masterpb.ConfigureRequest{Replication: "001"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("configure without the lock: %v", err)
	}
	l, err := c.LeaseAdminLock(ctx, &masterpb.LeaseAdminLockRequest{Owner: "shell@test"})
	if err != nil || l.Token == 0 {
		t.Fatalf("lock: %v %v", l, err)
	}
	if d := time.Until(time.UnixMilli(l.ExpiresUnixMs)); d < 25*time.Second || d > 31*time.Second {
		t.Fatalf("default lease ends in %v, want about 30s", d)
	}
	if _, err := c.LeaseAdminLock(ctx, &masterpb.LeaseAdminLockRequest{Owner: "other"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("second holder: %v", err)
	}
	if _, err := c.Configure(ctx, &masterpb.ConfigureRequest{LockToken: l.Token + 1, Replication: "001"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("configure with a wrong token: %v", err)
	}
	if _, err := c.Configure(ctx, &masterpb.ConfigureRequest{LockToken: l.Token, Replication: "9z"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("configure with a bad code: %v", err)
	}

	// Before: the flag's default, 000 (one copy).
	if got := assignCopies(t, s, ""); got != 1 {
		t.Fatalf("before configure: %d copies", got)
	}
	cr, err := c.Configure(ctx, &masterpb.ConfigureRequest{LockToken: l.Token, Replication: "001"})
	if err != nil || cr.DefaultReplication != "001" {
		t.Fatalf("configure: %v %v", cr, err)
	}
	if got := assignCopies(t, s, ""); got != 2 {
		t.Fatalf("after configure 001: %d copies", got)
	}
	// Per collection, over HTTP; the cluster default stays.
	var sj settingsJSON
	if code := postForm(t, s, "/cluster/configure", url.Values{"token": {itoa(int(l.Token))}, "collection": {"logs"}, "replication": {"000"}}, &sj); code != 200 ||
		sj.DefaultReplication != "001" || sj.CollectionReplication["logs"] != "000" {
		t.Fatalf("HTTP configure: %d %+v", code, sj)
	}
	if got := assignCopies(t, s, "collection=logs"); got != 1 {
		t.Fatalf("collection logs: %d copies", got)
	}
	if got := assignCopies(t, s, "collection=other"); got != 2 {
		t.Fatalf("collection other: %d copies", got)
	}
	if got := assignCopies(t, s, "collection=logs&replication=001"); got != 2 {
		t.Fatalf("explicit replication must win: %d copies", got)
	}

	// Topology shows the tree and the settings.
	top, err := c.Topology(ctx, &masterpb.TopologyRequest{})
	if err != nil || top.DefaultReplication != "001" || top.CollectionReplication["logs"] != "000" || len(top.DataCenters) != 1 ||
		len(top.DataCenters[0].Racks) != 1 || len(top.DataCenters[0].Racks[0].Nodes) != 2 {
		t.Fatalf("topology: %v %v", top, err)
	}
	n := top.DataCenters[0].Racks[0].Nodes[0]
	if n.Url != a.url() || len(n.Disks) != 1 || len(n.Disks[0].Volumes) == 0 || n.LastSeenUnixMs == 0 {
		t.Fatalf("topology node: %v", n)
	}

	// Renew, release; a stale token cannot release the successor's lock.
	r, err := c.LeaseAdminLock(ctx, &masterpb.LeaseAdminLockRequest{Owner: "shell@test", PreviousToken: l.Token, LeaseMs: 200})
	if err != nil || r.Token != l.Token {
		t.Fatalf("renew: %v %v", r, err)
	}
	// Another owner gets the lock once the 200ms lease has run out.
	var lj lockJSON
	var code int
	leased := func() bool {
		lj = lockJSON{}
		code = postForm(t, s, "/admin/lock", url.Values{"owner": {"script"}}, &lj)
		return code == 200
	}
	if !testutil.Eventually(5*time.Second, leased) || lj.Token <= l.Token || lj.Owner != "script" {
		t.Fatalf("HTTP lock after the lease ran out: %d %+v", code, lj)
	}
	if _, err := c.ReleaseAdminLock(ctx, &masterpb.ReleaseAdminLockRequest{Owner: "shell@test", Token: l.Token}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("stale release: %v", err)
	}
	var errBody map[string]string
	if code := postForm(t, s, "/cluster/configure", url.Values{"token": {itoa(int(l.Token))}, "replication": {"000"}}, &errBody); code != http.StatusConflict {
		t.Fatalf("configure with the expired token: %d %v", code, errBody)
	}
	if code := postForm(t, s, "/admin/unlock", url.Values{"owner": {"script"}, "token": {itoa(int(lj.Token))}}, nil); code != 200 {
		t.Fatalf("HTTP unlock: %d", code)
	}
	if s.cons.State().Lock.Owner != "" {
		t.Fatal("lock held after unlock")
	}
	if s.Settings().DefaultReplication != "001" {
		t.Fatal("settings lost")
	}
}

// assignCopies assigns with query and returns how many copies the volume has.
func assignCopies(t *testing.T, s *Server, query string) int {
	t.Helper()
	r, code := assignHTTP(t, s, query)
	if code != 200 {
		t.Fatalf("assign?%s: %d %+v", query, code, r)
	}
	f, err := fid.Parse(r.Fid)
	if err != nil {
		t.Fatal(err)
	}
	var lr lookupResponse
	getJSON(t, "GET", "http://"+s.HTTPAddr()+"/dir/lookup?volumeId="+itoa(int(f.Volume)), &lr)
	return len(lr.Locations)
}

func TestReportVolumeFailureStopsAssigns(t *testing.T) {
	s := startMaster(t, t.TempDir(), func(c *Config) { c.FailureCooldown = 300 * time.Millisecond })
	a := newFakeVolumeServer(t, 18092, "dc1", "rack1", 20)
	b := newFakeVolumeServer(t, 18093, "dc1", "rack1", 20)
	a.connect(s.GRPCAddr())
	b.connect(s.GRPCAddr())
	c := grpcClient(t, s)
	ctx := context.Background()
	grown := map[uint32]bool{}
	var g struct {
		VolumeIDs []uint32 `json:"volumeIds"`
	}
	if code := getJSON(t, "POST", "http://"+s.HTTPAddr()+"/vol/grow?replication=001&count=2", &g); code != 200 || len(g.VolumeIDs) != 2 {
		t.Fatalf("grow: %d %+v", code, g)
	}
	for _, v := range g.VolumeIDs {
		grown[v] = true
	}
	bad := g.VolumeIDs[0]
	if _, err := c.ReportVolumeFailure(ctx, &masterpb.ReportVolumeFailureRequest{VolumeId: 999, FailedUrl: b.url(), Error: "x"}); status.Code(err) != codes.NotFound {
		t.Fatalf("report for an unknown volume: %v", err)
	}
	if _, err := c.ReportVolumeFailure(ctx, &masterpb.ReportVolumeFailureRequest{VolumeId: bad, FailedUrl: b.url(), Error: "disk full"}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		r, code := assignHTTP(t, s, "replication=001")
		f, _ := fid.Parse(r.Fid)
		if code != 200 || f.Volume == bad || !grown[f.Volume] {
			t.Fatalf("assign after failure report: %d %+v", code, r)
		}
	}
	var cs ClusterStatus
	getJSON(t, "GET", "http://"+s.HTTPAddr()+"/cluster/status", &cs)
	if len(cs.UnwritableVolumes) != 1 || cs.UnwritableVolumes[0].VolumeID != bad || cs.UnwritableVolumes[0].Error != "disk full" {
		t.Fatalf("status unwritable = %+v", cs.UnwritableVolumes)
	}
	// After the cooldown, heartbeats from both copies bring it back.
	waitFor(t, 3*time.Second, "volume writable again", func() bool { return len(s.topo.Failures()) == 0 })
	seen := false
	for i := 0; i < 60 && !seen; i++ {
		r, _ := assignHTTP(t, s, "replication=001")
		f, _ := fid.Parse(r.Fid)
		seen = f.Volume == bad
	}
	if !seen {
		t.Fatal("healed volume never assigned again")
	}
}

func TestErrorTableAdmin(t *testing.T) {
	for _, e := range []error{consensus.ErrNotLockOwner, consensus.ErrLocked} {
		if httpStatus(e) != http.StatusConflict || grpcCode(e) != codes.FailedPrecondition {
			t.Errorf("%v: %d %v", e, httpStatus(e), grpcCode(e))
		}
	}
	if err := (&notLeaderError{leader: "m2:9333"}); !errors.Is(err, consensus.ErrNotLeader) || !strings.Contains(err.Error(), "m2:9333") {
		t.Errorf("notLeaderError: %v", err)
	}
}
