package consensus

import (
	"context"
	"maps"
	"testing"
	"time"
)

// TestDeficitsSurviveRestartAndSnapshot: deficits committed, changed and
// cleared are what a restarted node reads back, from the log and from a
// snapshot.
func TestDeficitsSurviveRestartAndSnapshot(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	n := openTest(t, dir, 10)
	if err := n.SetDeficits(ctx, map[uint32]Deficit{
		3: {Since: since, Cause: "a write reached only a:1", Good: []string{"a:1"}},
		4: {Since: since, Cause: "copy lost", Good: []string{"a:1", "b:1"}},
		5: {Since: since, Good: []string{"c:1"}},
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := n.SetDeficits(ctx, map[uint32]Deficit{4: {Since: since, Cause: "again", Good: []string{"b:1"}}}, []uint32{5, 99}); err != nil {
		t.Fatal(err)
	}
	want := map[uint32]Deficit{
		3: {Since: since, Cause: "a write reached only a:1", Good: []string{"a:1"}},
		4: {Since: since, Cause: "again", Good: []string{"b:1"}},
	}
	same := func(got map[uint32]Deficit) bool { return maps.EqualFunc(got, want, Deficit.Equal) }
	if got := n.Deficits(); !same(got) {
		t.Fatalf("deficits = %+v, want %+v", got, want)
	}
	// The copy handed out is the caller's.
	n.Deficits()[3].Good[0] = "changed"
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = openTest(t, dir, 10)
	if got := n.State().Deficits; !same(got) {
		t.Fatalf("deficits after restart = %+v, want %+v", got, want)
	}
	if err := n.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	n.Close()
	n = openTest(t, dir, 10)
	defer n.Close()
	if got := n.Deficits(); !same(got) {
		t.Fatalf("deficits after a snapshot restore = %+v, want %+v", got, want)
	}
}
