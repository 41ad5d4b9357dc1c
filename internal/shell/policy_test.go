package shell

import (
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/testcluster"
	"github.com/kelpfs/kelp/internal/testutil"
)

// cluster.configure -writePolicy sets a collection's write policy through
// Raft; collection.list and cluster.status show it; bad input is a usage
// error.
func TestClusterConfigureWritePolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{DataCenter: "dc1"}, {DataCenter: "dc2"}}, PulseInterval: 500 * time.Millisecond})
	out := &testutil.Buffer{}
	sh, err := New(Config{Masters: c.MasterAddrs(), Out: out, Owner: "policy test"})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	got := mustRun(t, sh, out, "lock\ncluster.configure -collection=deg -replication=100 -writePolicy=degraded -minCopies=1\ncluster.configure -collection=str -writePolicy=strict")
	wantLines(t, got, `collection "deg" write policy: degraded (minCopies 1)`, `collection "str" write policy: strict`, "default write policy: strict")
	for _, bad := range []string{"cluster.configure -writePolicy=loose", "cluster.configure -minCopies=2", "cluster.configure -writePolicy=strict -minCopies=1", "cluster.configure -writePolicy=degraded:2"} {
		if err := run(t, sh, bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	got = mustRun(t, sh, out, "unlock\ncollection.list")
	wantLines(t, got, `collection "deg": 0 volumes, 0 copies, 0 files, 0 B, replication 100, write policy degraded (minCopies 1)`)
	got = mustRun(t, sh, out, "cluster.status")
	if !strings.Contains(got, `"deg": "degraded:1"`) {
		t.Errorf("cluster.status does not show the write policy:\n%s", got)
	}
}
