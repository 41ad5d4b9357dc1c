package filerserver

import (
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/testcluster"
)

// Issue 8: the filer answered a write 503 86 ms after the leading master
// died. A write that needs an assign right after the leader dies waits for
// the election and succeeds.
func TestClusterWriteDuringLeaderElection(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-master cluster")
	}
	c := testcluster.Start(t, testcluster.Options{Masters: 3, Volumes: []testcluster.VolumeSpec{{}, {}}})
	s := startOn(t, c, Config{})
	base := "http://" + s.Addr()
	resp, body := do(t, "PUT", base+"/before", strings.NewReader("before"))
	want(t, resp, body, 201)
	c.StopLeader()
	start := time.Now()
	// A collection not written yet: no reserved key block, so the filer
	// must assign while the masters elect a new leader.
	resp, body = do(t, "PUT", base+"/after?collection=after", strings.NewReader("after"))
	want(t, resp, body, 201)
	t.Logf("write after the leader died took %v", time.Since(start))
	resp, body = do(t, "GET", base+"/after", nil)
	want(t, resp, body, 200)
	if string(body) != "after" {
		t.Fatalf("read %q", body)
	}
}
