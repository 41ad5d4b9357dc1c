package master

import (
	"strings"
	"testing"
	"time"
)

// Issue 8: after a network cut, dc2's volume servers kept heartbeating but
// could not be reached, and the master went on handing them writes. The
// master must notice it cannot reach a server, show it, and leave it out of
// assigns and growth until it can reach it again.
func TestUnreachableVolumeServerLeavesAssigns(t *testing.T) {
	s := startMaster(t, t.TempDir()) // pulse 100ms
	a := newFaultyVolumeServer(t, 18190, "dc1", "rack1", 10)
	b := newFaultyVolumeServer(t, 18191, "dc2", "rack1", 10)
	a.connect(s.GRPCAddr())
	b.connect(s.GRPCAddr())
	if r, code := assignHTTP(t, s, "replication=100"); code != 200 {
		t.Fatalf("assign before the cut: %d %+v", code, r)
	}
	before := len(a.allocations())

	b.ln.setCut(true)
	took := waitFor(t, 5*time.Second, "b shown unreachable", func() bool {
		n, ok := serverStatus(t, s, b.url())
		return ok && !n.Reachable
	})
	t.Logf("unreachable server noticed after %v (pulse 100ms)", took)
	n, _ := serverStatus(t, s, b.url())
	if n.ProbeError == "" {
		t.Error("no probe error shown")
	}
	r, code := assignHTTP(t, s, "replication=100")
	if code != 503 || !strings.Contains(r.Error, "cannot be reached") || !strings.Contains(r.Error, b.url()) {
		t.Fatalf("assign with dc2 unreachable: %d %q, want 503 naming %s as unreachable", code, r.Error, b.url())
	}
	if got := len(a.allocations()); got != before {
		t.Errorf("growth allocated on a while dc2 was unreachable: %d allocations, had %d", got, before)
	}
	if r, code := assignHTTP(t, s, "replication=000&dataCenter=dc2"); code == 200 {
		t.Errorf("assign in dc2 went to the unreachable server: %+v", r)
	}
	// Heartbeats went on all along: the server is still listed.
	if _, ok := serverStatus(t, s, b.url()); !ok {
		t.Fatal("unreachable server dropped from the status")
	}

	b.ln.setCut(false)
	waitFor(t, 5*time.Second, "b reachable again", func() bool {
		n, ok := serverStatus(t, s, b.url())
		return ok && n.Reachable
	})
	if r, code := assignHTTP(t, s, "replication=100"); code != 200 {
		t.Fatalf("assign after the cut healed: %d %+v", code, r)
	}
}
