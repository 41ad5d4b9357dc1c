package consensus

import (
	"context"
	"testing"
	"time"
)

// keyRange is a block of file keys a member handed out.
type keyRange struct{ first, last uint64 }

func (a keyRange) overlaps(b keyRange) bool { return a.first <= b.last && b.first <= a.last }

// TestPartitionedLeaderStepsDownMajorityGoesOn cuts the leader off from
// both other members: the leader stops handing out keys (no split brain),
// the majority elects a new leader and goes on, no key handed out on either
// side is handed out twice, and after the network heals the old leader
// follows and catches up.
func TestPartitionedLeaderStepsDownMajorityGoesOn(t *testing.T) {
	g := newTestGroup(t, 3)
	ctx := context.Background()
	lead := g.leader(10 * time.Second)
	var issued []keyRange
	take := func(i int, n uint64) error {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		k, err := g.nodes[i].NextKeys(cctx, n)
		if err == nil {
			issued = append(issued, keyRange{k, k + n - 1})
		}
		return err
	}
	for range 3 {
		if err := take(lead, 20); err != nil {
			t.Fatal(err)
		}
	}

	g.net.Isolate(g.peers[lead].ID)
	// A request on the cut-off leader either fails or, if it committed
	// before the cut took hold, is remembered by the majority (checked
	// below through the uniqueness of every key handed out).
	_ = take(lead, 20)

	// The majority elects one of its own.
	var newLead int
	deadline := time.Now().Add(10 * time.Second)
	for newLead = -1; newLead < 0; {
		for i, n := range g.nodes {
			if i != lead && n.IsLeader() {
				newLead = i
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the majority elected no leader")
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
	// The old leader steps down and refuses to hand out keys.
	for g.nodes[lead].IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("the cut-off leader still leads")
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
	if err := take(lead, 20); err == nil {
		t.Fatal("the cut-off member handed out keys")
	}
	for range 3 {
		if err := take(newLead, 20); err != nil {
			t.Fatalf("the majority's leader: %v", err)
		}
	}
	code := "001"
	if err := g.nodes[newLead].UpdateSettings(ctx, SettingsUpdate{DefaultReplication: &code}); err != nil {
		t.Fatal(err)
	}

	// Healed: one leader again, the old one a follower with the majority's state.
	g.net.Heal()
	g.leader(10 * time.Second)
	for {
		s := g.nodes[lead].State()
		if s.Settings.DefaultReplication == "001" && s.KeyCeiling == g.nodes[newLead].State().KeyCeiling {
			break
		}
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatalf("the old leader did not catch up: %+v", s)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
	l := g.leader(5 * time.Second)
	if err := take(l, 20); err != nil {
		t.Fatal(err)
	}
	for i := range issued {
		for j := range i {
			if issued[i].overlaps(issued[j]) {
				t.Fatalf("keys handed out twice: %v and %v", issued[j], issued[i])
			}
		}
	}
}
