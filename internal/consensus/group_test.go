package consensus

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/testutil/netcut"
)

// testGroup is three members on loopback, each in its own directory, over
// a network the test can cut (netcut).
type testGroup struct {
	t     *testing.T
	dir   string
	peers []Peer
	nodes []*Node
	lns   []net.Listener // bound for a member not yet opened
	net   *netcut.Network
}

// newTestGroup opens size members. Every member's listener is bound on
// 127.0.0.1:0 first, since Raft needs all the addresses before any member
// starts.
func newTestGroup(t *testing.T, size int) *testGroup {
	g := &testGroup{t: t, dir: t.TempDir(), nodes: make([]*Node, size), lns: make([]net.Listener, size), net: netcut.New()}
	t.Cleanup(func() {
		for i := range g.nodes {
			g.close(i)
			if g.lns[i] != nil {
				g.lns[i].Close()
			}
		}
	})
	for i := range size {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		id := "m" + string(rune('1'+i))
		g.lns[i] = ln
		g.peers = append(g.peers, Peer{ID: id, Address: ln.Addr().String()})
		g.net.Add(id, ln.Addr().String())
	}
	for i := range g.nodes {
		g.open(i)
	}
	return g
}

func (g *testGroup) open(i int) {
	g.t.Helper()
	if err := g.tryOpen(i); err != nil {
		g.t.Fatal(err)
	}
}

func (g *testGroup) tryOpen(i int) error {
	ln := g.lns[i]
	g.lns[i] = nil
	if ln == nil { // opened again after a close: the member keeps its port
		var err error
		if ln, err = net.Listen("tcp", g.peers[i].Address); err != nil {
			return err
		}
	}
	n, err := Open(Config{
		Dir: filepath.Join(g.dir, g.peers[i].ID), ID: g.peers[i].ID, Listener: ln, Dial: g.net.Dialer(g.peers[i].ID),
		Peers: g.peers, KeyBlock: 50, HeartbeatTimeout: 300 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		ln.Close()
		return err
	}
	g.nodes[i] = n
	return nil
}

func (g *testGroup) close(i int) {
	if g.nodes[i] != nil {
		g.nodes[i].Close()
		g.nodes[i] = nil
	}
}

// leader waits until exactly one live member leads and the others agree.
func (g *testGroup) leader(within time.Duration) int {
	g.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		lead := -1
		agree := true
		for i, n := range g.nodes {
			if n == nil {
				continue
			}
			if n.IsLeader() {
				lead = i
			}
		}
		for _, n := range g.nodes {
			if n != nil && lead >= 0 {
				if id, _ := n.Leader(); id != g.peers[lead].ID {
					agree = false
				}
			}
		}
		if lead >= 0 && agree {
			return lead
		}
		time.Sleep(10 * time.Millisecond)
	}
	g.t.Fatalf("no agreed leader within %v", within)
	return -1
}

func TestGroupFailoverKeepsKeysUniqueAndRejoinCatchesUp(t *testing.T) {
	g := newTestGroup(t, 3)
	ctx := context.Background()
	lead := g.leader(10 * time.Second)
	var last uint64
	for i := 0; i < 3; i++ {
		k, err := g.nodes[lead].NextKeys(ctx, 20)
		if err != nil {
			t.Fatal(err)
		}
		last = k + 19
	}
	follower := (lead + 1) % 3
	if _, err := g.nodes[follower].NextKeys(ctx, 1); err == nil {
		t.Fatal("a follower handed out keys")
	}
	code := "010"
	if err := g.nodes[lead].UpdateSettings(ctx, SettingsUpdate{DefaultReplication: &code}); err != nil {
		t.Fatal(err)
	}

	g.close(lead)
	start := time.Now()
	newLead := g.leader(5 * time.Second)
	t.Logf("new leader after %v", time.Since(start))
	// On a loaded machine the first leader of a new term can lose its
	// leadership again while committing; keys must then come from whoever
	// leads next, and still above every key handed out before.
	k, err := g.nodes[newLead].NextKeys(ctx, 1)
	for errors.Is(err, ErrNotLeader) && time.Since(start) < 10*time.Second {
		newLead = g.leader(5 * time.Second)
		k, err = g.nodes[newLead].NextKeys(ctx, 1)
	}
	if err != nil || k <= last {
		t.Fatalf("key from the new leader %d, %v; want > %d", k, err, last)
	}
	if got := g.nodes[newLead].State().Settings.DefaultReplication; got != "010" {
		t.Fatalf("new leader lost the settings: %q", got)
	}

	// The old leader comes back as a follower and catches up.
	g.open(lead)
	if l := g.leader(5 * time.Second); l == lead {
		t.Fatalf("the rejoined member took over leadership")
	}
	want := g.nodes[newLead].State()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := g.nodes[lead].State()
		ls, fs := g.nodes[newLead].Stats(), g.nodes[lead].Stats()
		if got.KeyCeiling == want.KeyCeiling && got.Settings.DefaultReplication == "010" && fs.AppliedIndex == ls.AppliedIndex {
			if fs.Role != "follower" {
				t.Fatalf("rejoined member role %q", fs.Role)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rejoined member state %+v (%+v), leader %+v (%+v)", got, fs, want, ls)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestFollowerForgetsASilentLeader(t *testing.T) {
	g := newTestGroup(t, 3)
	lead := g.leader(10 * time.Second)
	f := (lead + 1) % 3
	changed := g.nodes[f].LeaderChanged()
	g.close(lead)
	// Long before raft's own election gives up on the old leader, Leader()
	// stops naming it: 150ms is half the heartbeat timeout.
	deadline := time.Now().Add(2 * time.Second)
	for {
		id, _ := g.nodes[f].Leader()
		if id != g.peers[lead].ID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("follower still names the dead leader")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("LeaderChanged did not fire after the leader died")
	}
}
