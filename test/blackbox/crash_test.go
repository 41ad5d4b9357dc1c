package blackbox

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/testutil"
)

// TestKillDashNineLosesNoAcknowledgedWrite runs writers against `kelp server`,
// kills the server with SIGKILL in the middle of the load, restarts it on the
// same directory and reads back every write acknowledged so far, in this
// round and every earlier one: a crash must not lose the writes a previous
// crash left behind either.
func TestKillDashNineLosesNoAcknowledgedWrite(t *testing.T) {
	dir := t.TempDir()
	var ports serverPorts
	acked := map[string][]byte{} // file id -> bytes, of every round
	for round := 0; round < 3; round++ {
		srv := startServer(t, dir, &ports)
		// Kill after a number of acknowledgements that grows with the
		// rounds, while the writers are still in flight.
		before := len(acked)
		writeUntilKilled(t, hostport(ports.master), srv, 50*(round+1), acked)

		srv = startServer(t, dir, &ports)
		volume := hostport(ports.volume) // the ports change if one was taken meanwhile
		for id, want := range acked {
			code, got, err := get("http://" + volume + "/" + id)
			if err != nil || code != 200 || !bytes.Equal(got, want) {
				t.Fatalf("round %d: acknowledged %s reads back %d (%d bytes, err %v), want %d bytes",
					round, id, code, len(got), err, len(want))
			}
		}
		t.Logf("round %d: %d new acknowledged writes, all %d survived kill -9", round, len(acked)-before, len(acked))
		srv.kill()
	}
}

// writeUntilKilled writes files with 8 workers, SIGKILLs the server once n
// more writes have been acknowledged, and adds every write the server
// acknowledged to acked, by file id.
func writeUntilKilled(t *testing.T, master string, srv *process, n int, acked map[string][]byte) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	fresh := 0
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for ctx.Err() == nil {
				a, err := assign(ctx, master)
				if err != nil {
					continue
				}
				body := make([]byte, rng.IntN(64<<10))
				for i := range body {
					body[i] = byte(rng.Uint32())
				}
				url := fmt.Sprintf("http://%s/%s", a.URL, a.FID)
				if code, err := put(ctx, url, body); err == nil && code == 201 {
					mu.Lock()
					acked[a.FID] = body
					fresh++
					mu.Unlock()
				}
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return fresh }
	if !testutil.Eventually(60*time.Second, func() bool { return count() >= n }) {
		t.Fatalf("only %d of %d writes acknowledged; log:\n%s", count(), n, srv.log)
	}
	srv.kill() // SIGKILL while writers are in flight
	cancel()
	wg.Wait()
}
