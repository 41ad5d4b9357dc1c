package master

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// Issue 8: "in 0.3 s, 36 empty single-copy 'replication 100' volumes filled
// every dc1 slot, silently." A growth whose allocation fails on one server
// must delete the copies it made elsewhere, and automatic growth of the
// layout must pause instead of looping.
func TestFailedGrowthIsRolledBackAndPaused(t *testing.T) {
	s := startMaster(t, t.TempDir())
	a := newFaultyVolumeServer(t, 18192, "dc1", "rack1", 40)
	b := newFaultyVolumeServer(t, 18193, "dc2", "rack1", 40)
	a.connect(s.GRPCAddr())
	b.connect(s.GRPCAddr())
	b.failAllocate.Store(true)

	r, code := assignHTTP(t, s, "replication=100")
	if code != 503 || !strings.Contains(r.Error, "disk on fire") {
		t.Fatalf("assign with a failing dc2: %d %q, want 503 naming the failure", code, r.Error)
	}
	made := a.allocations()
	if len(made) == 0 {
		t.Fatal("growth never allocated on a")
	}
	if got := a.deletes(); !slices.Equal(got, made) {
		t.Fatalf("copies made on a: %v; deleted: %v", made, got)
	}
	if got := a.volumeIDs(); len(got) != 0 {
		t.Fatalf("a still holds %v after the rollback", got)
	}

	// A burst of assigns within the pause grows nothing.
	for range 20 {
		r, code := assignHTTP(t, s, "replication=100")
		if code != 503 || !strings.Contains(r.Error, "is paused for") || !strings.Contains(r.Error, "disk on fire") {
			t.Fatalf("assign within the pause: %d %q", code, r.Error)
		}
	}
	if got := len(a.allocations()); got != len(made) {
		t.Fatalf("a got %d allocations during the pause, want %d", got, len(made))
	}

	b.failAllocate.Store(false)
	waitFor(t, 5*time.Second, "growth resumes after the pause", func() bool {
		_, code := assignHTTP(t, s, "replication=100")
		return code == 200
	})
}

// A copy whose rollback delete fails is listed and deleted later.
func TestAbandonedCopyIsDeletedLater(t *testing.T) {
	s := startMaster(t, t.TempDir())
	a := newFaultyVolumeServer(t, 18194, "dc1", "rack1", 40)
	b := newFaultyVolumeServer(t, 18195, "dc2", "rack1", 40)
	a.connect(s.GRPCAddr())
	b.connect(s.GRPCAddr())
	b.failAllocate.Store(true)
	a.failDelete.Store(true)

	if _, code := assignHTTP(t, s, "replication=100"); code != 503 {
		t.Fatalf("assign with a failing dc2: %d", code)
	}
	made := a.allocations()
	st := clusterStatusJSON(t, s)
	if len(st.AbandonedCopies) != len(made) || len(made) == 0 || st.AbandonedCopies[0].URL != a.url() {
		t.Fatalf("abandoned copies %+v, want the %d made on %s", st.AbandonedCopies, len(made), a.url())
	}
	a.failDelete.Store(false)
	waitFor(t, 5*time.Second, "abandoned copies deleted", func() bool {
		return len(a.volumeIDs()) == 0 && len(clusterStatusJSON(t, s).AbandonedCopies) == 0
	})
}
