package testcluster_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/testcluster"
	"github.com/kelpfs/kelp/internal/testutil"
)

// TestMinorityMasterStopsAssigning: a leader cut off from the other two
// masters (here: both crashed, which is what a partition looks like from its
// side) steps down and stops assigning file ids: no split brain, and no
// acknowledged write depends on a master that has lost its quorum.
func TestMinorityMasterStopsAssigning(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Masters: 3, Volumes: []testcluster.VolumeSpec{{}}, PulseInterval: 500 * time.Millisecond})
	lead := c.Leader()
	assign := func() (int, string) {
		resp, err := http.Get("http://" + lead.Addr + "/dir/assign")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	testutil.WaitFor(t, 20*time.Second, func() bool { code, _ := assign(); return code == http.StatusOK },
		"the leader does not assign with its quorum")
	for _, f := range c.Followers() {
		f.Kill()
	}
	testutil.WaitFor(t, 20*time.Second, func() bool { code, _ := assign(); return code == http.StatusServiceUnavailable },
		"the leader alone in its minority still assigns")
	// And it keeps refusing.
	for range 5 {
		if code, body := assign(); code == http.StatusOK {
			t.Fatalf("the minority master assigned again: %s", body)
		}
	}
	_, body := assign()
	t.Logf("minority master answers: %s", body)
}
