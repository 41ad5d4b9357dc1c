package blackbox

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestKillDashNineLosesNoAcknowledgedWrite runs writers against `kelp server`,
// kills the server with SIGKILL in the middle of the load, restarts it on the
// same directory and reads back every write that was acknowledged.
func TestKillDashNineLosesNoAcknowledgedWrite(t *testing.T) {
	dir := t.TempDir()
	mport, vport, fport := freePortPair(t), freePortPair(t), freePortPair(t)
	master, volume := "127.0.0.1:"+strconv.Itoa(mport), "127.0.0.1:"+strconv.Itoa(vport)
	args := []string{"server", "--dir=" + dir, "--ip=127.0.0.1", "--master.port=" + strconv.Itoa(mport),
		"--volume.port=" + strconv.Itoa(vport), "--filer.port=" + strconv.Itoa(fport)}

	for round := 0; round < 3; round++ {
		srv := startKelp(t, args...)
		waitHealthy(t, master, srv)
		waitHealthy(t, volume, srv)

		acked := writeUntilKilled(t, master, srv, 300*time.Millisecond+time.Duration(round)*200*time.Millisecond)
		if len(acked) == 0 {
			t.Fatalf("round %d: no write was acknowledged; log:\n%s", round, srv.log.String())
		}

		srv = startKelp(t, args...)
		waitHealthy(t, volume, srv)
		for url, want := range acked {
			code, got, err := get(url)
			if err != nil || code != 200 || !bytes.Equal(got, want) {
				t.Fatalf("round %d: acknowledged %s reads back %d (%d bytes, err %v), want %d bytes",
					round, url, code, len(got), err, len(want))
			}
		}
		t.Logf("round %d: %d acknowledged writes survived kill -9", round, len(acked))
		srv.kill()
	}
}

// writeUntilKilled writes files with 8 workers and SIGKILLs the server after d;
// it returns every write the server acknowledged, by URL.
func writeUntilKilled(t *testing.T, master string, srv *process, d time.Duration) map[string][]byte {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	acked := map[string][]byte{}
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
					acked[url] = body
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(d)
	srv.kill() // SIGKILL while writers are in flight
	cancel()
	wg.Wait()
	return acked
}
