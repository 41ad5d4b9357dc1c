package filersync

import (
	"fmt"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/testutil/bridge"
)

// TestSyncSurvivesLinkCut: the link to B's filer is cut while the sync runs
// and both sides keep changing; once it is back, the sync converges by
// itself, copying each changed file exactly once.
func TestSyncSurvivesLinkCut(t *testing.T) {
	a, b := startSite(t), startSite(t)
	link, err := bridge.New(b.GRPCAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { link.Close() })
	r := startSyncAt(t, a.GRPCAddr(), link.Addr(), 4)

	for i := range 10 {
		put(t, a, fmt.Sprintf("/l/a%d", i), data(fmt.Sprintf("a%d", i), 3000))
		put(t, b, fmt.Sprintf("/l/b%d", i), data(fmt.Sprintf("b%d", i), 3000))
	}
	waitConverged(t, r, a, b, time.Minute)
	before := copies(r)

	// The link goes silent, then every connection is cut; the sync's
	// reconnects find nothing there.
	accepted := link.Accepted()
	link.Blackhole()
	link.Drop()
	for i := 10; i < 20; i++ {
		put(t, a, fmt.Sprintf("/l/a%d", i), data(fmt.Sprintf("a%d", i), 5000))
		put(t, b, fmt.Sprintf("/l/b%d", i), data(fmt.Sprintf("b%d", i), 5000))
	}
	put(t, a, "/l/b1", []byte("b1 changed on a during the cut"))
	put(t, b, "/l/a2", []byte("a2 changed on b during the cut"))
	for link.Accepted() == accepted { // the sync tried to reach B during the cut
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
	link.Drop()
	link.Resume()

	took := waitConverged(t, r, a, b, 2*time.Minute)
	t.Logf("converged %v after the link came back", took.Round(time.Millisecond))
	if got := copies(r) - before; got != 22 {
		t.Errorf("after the cut %d files were copied, want 22 (20 new, 2 changed)", got)
	}
	if got := string(get(t, b, "/l/b1")); got != "b1 changed on a during the cut" {
		t.Errorf("/l/b1 on b = %q", got)
	}
	if got := string(get(t, a, "/l/a2")); got != "a2 changed on b during the cut" {
		t.Errorf("/l/a2 on a = %q", got)
	}
}
