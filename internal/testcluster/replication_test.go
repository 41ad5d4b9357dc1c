package testcluster_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/testcluster"
	"github.com/kelpfs/kelp/internal/testutil"
	"github.com/kelpfs/kelp/internal/topology"
)

// twoByTwoByTwo is issue 3's test topology: 2 data centers x 2 racks x 2 servers.
func twoByTwoByTwo() []testcluster.VolumeSpec {
	var specs []testcluster.VolumeSpec
	for _, dc := range []string{"dc1", "dc2"} {
		for _, rack := range []string{"r1", "r2"} {
			for range 2 {
				specs = append(specs, testcluster.VolumeSpec{DataCenter: dc, Rack: rack, MaxVolumes: 12})
			}
		}
	}
	return specs
}

// readFrom reads a needle from one specific volume server, bypassing fail-over.
func readFrom(server string, id fid.FileID) (int, []byte, error) {
	resp, err := http.Get("http://" + server + "/" + id.String())
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// TestReplicatedWritesLandWhereTheCodeSays writes under every code the
// topology can satisfy and checks each copy holds the bytes and the copies sit
// where the code demands.
func TestReplicatedWritesLandWhereTheCodeSays(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Volumes: twoByTwoByTwo(), Fsync: true})
	cl, err := client.New(client.Config{Masters: c.MasterAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range []string{"000", "001", "010", "100", "011", "110", "101"} {
		t.Run(code, func(t *testing.T) {
			want := replication.Must(code)
			for i := 0; i < 20; i++ {
				body := []byte(fmt.Sprintf("file %d under %s", i, code))
				id, _, err := cl.PutBytes(context.Background(), client.AssignRequest{Replication: code}, body, client.UploadOptions{})
				if err != nil {
					t.Fatalf("put: %v", err)
				}
				locs, err := cl.Lookup(context.Background(), id.Volume)
				if err != nil {
					t.Fatal(err)
				}
				var tl []topology.Location
				for _, l := range locs {
					tl = append(tl, topology.Location{URL: l.URL, DataCenter: l.DataCenter, Rack: l.Rack})
					status, got, err := readFrom(l.URL, id)
					if err != nil || status != http.StatusOK || !bytes.Equal(got, body) {
						t.Fatalf("copy on %s of %s: status %d, %q, err %v", l.URL, id, status, got, err)
					}
				}
				if err := topology.CheckPlacement(want, tl); err != nil {
					t.Fatalf("volume %d: %v (locations %+v)", id.Volume, err, locs)
				}
			}
		})
	}
	// 200 asks for three data centers; there are two, and the error says so.
	_, err = cl.Assign(context.Background(), client.AssignRequest{Replication: "200"})
	if err == nil {
		t.Fatal("assign with replication 200 on two data centers succeeded")
	}
	t.Logf("200 on two data centers: %v", err)
}

// TestReplicaLossDuringWritesLosesNoAcknowledgedWrite stops a volume server
// holding copies while writers run: only writes in flight may fail, writes
// that meet the lost copy are retried elsewhere, and every acknowledged write
// is readable afterwards from a surviving copy. Writes acknowledged after the
// stop must have both their copies on live servers (a replicated write is
// acknowledged only when every copy has it).
func TestReplicaLossDuringWritesLosesNoAcknowledgedWrite(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Volumes: twoByTwoByTwo(), Fsync: true})
	cl, err := client.New(client.Config{Masters: c.MasterAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu        sync.Mutex
		acked     = map[fid.FileID]ackedWrite{}
		ackedLate atomic.Int64 // acknowledged writes begun after the stop
		failed    atomic.Int64
		seq       atomic.Int64
		stopped   atomic.Bool
	)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	const writers = 8
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				late := stopped.Load()
				body := []byte(fmt.Sprintf("payload %d", seq.Add(1)))
				id, _, err := cl.PutBytes(ctx, client.AssignRequest{Replication: "010"}, body, client.UploadOptions{})
				if err != nil {
					if ctx.Err() == nil {
						failed.Add(1)
					}
					continue
				}
				mu.Lock()
				acked[id] = ackedWrite{body, late}
				mu.Unlock()
				if late {
					ackedLate.Add(1)
				}
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	if !testutil.Eventually(20*time.Second, func() bool { return count() >= 50 }) {
		t.Fatalf("only %d writes acknowledged before the stop", count())
	}

	// The victim holds a copy of a volume being written.
	victim, vid, survivor := holderOf(t, c, cl, &mu, acked)
	victim.Stop()
	stopped.Store(true)
	// A write to the surviving copy of that volume is refused, naming the
	// lost copy: an acknowledgement means every copy has the bytes.
	requireRefused(t, survivor, vid, victim.Addr)
	if !testutil.Eventually(20*time.Second, func() bool { return ackedLate.Load() >= 100 }) {
		t.Fatalf("only %d writes acknowledged after %s stopped", ackedLate.Load(), victim.Addr)
	}
	cancel()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	// The client retries on a new assignment, so a lost replica costs at most
	// the writes that were in flight on it.
	if f := failed.Load(); f > writers {
		t.Errorf("%d writes failed after retries; want at most the %d in flight", f, writers)
	}
	for id, w := range acked {
		rc, _, err := cl.Get(context.Background(), id, nil)
		if err != nil {
			t.Fatalf("acknowledged %s unreadable with %s down: %v", id, victim.Addr, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, w.body) {
			t.Fatalf("acknowledged %s reads %q, want %q (err %v)", id, got, w.body, err)
		}
		if w.afterStop {
			requireLiveCopies(t, cl, id, w.body, victim.Addr, 2)
		}
	}
	t.Logf("%d writes acknowledged (%d after %s stopped), %d failed", len(acked), ackedLate.Load(), victim.Addr, failed.Load())
}

// ackedWrite is an acknowledged write and whether it began after the victim
// had stopped.
type ackedWrite struct {
	body      []byte
	afterStop bool
}

// holderOf returns a running volume server holding a copy of one of the
// acknowledged writes, the volume, and the server holding its other copy.
func holderOf(t *testing.T, c *testcluster.Cluster, cl *client.Client, mu *sync.Mutex, acked map[fid.FileID]ackedWrite) (*testcluster.Node, uint32, string) {
	t.Helper()
	mu.Lock()
	var id fid.FileID
	for id = range acked {
		break
	}
	mu.Unlock()
	locs, err := cl.Lookup(context.Background(), id.Volume)
	if err != nil || len(locs) != 2 {
		t.Fatalf("lookup %s: %+v %v; want two copies", id, locs, err)
	}
	for _, v := range c.Volume {
		if v.Addr == locs[0].URL {
			return v, id.Volume, locs[1].URL
		}
	}
	t.Fatalf("volume %d is on %s, not a server of the cluster", id.Volume, locs[0].URL)
	return nil, 0, ""
}

// requireRefused writes a new file of volume vid to server and requires a
// 503 that names the unreachable copy down (or, once the master has dropped
// it, says that copies are missing).
func requireRefused(t *testing.T, server string, vid uint32, down string) {
	t.Helper()
	id := fid.FileID{Volume: vid, Key: 1 << 60, Cookie: 0x5eed}
	req, _ := http.NewRequest(http.MethodPut, "http://"+server+"/"+id.String(), strings.NewReader("after the loss"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	clear := strings.Contains(string(body), down) || strings.Contains(string(body), "needs 2 copies")
	if resp.StatusCode != http.StatusServiceUnavailable || !clear {
		t.Fatalf("write to volume %d on %s with its copy on %s down: %d %s; want 503 naming %s",
			vid, server, down, resp.StatusCode, body, down)
	}
}

// requireLiveCopies fails unless at least n servers other than down hold the
// bytes of id.
func requireLiveCopies(t *testing.T, cl *client.Client, id fid.FileID, want []byte, down string, n int) {
	t.Helper()
	locs, err := cl.Lookup(context.Background(), id.Volume)
	if err != nil {
		t.Fatal(err)
	}
	live := 0
	for _, l := range locs {
		if l.URL == down {
			continue
		}
		if status, got, err := readFrom(l.URL, id); err == nil && status == http.StatusOK && bytes.Equal(got, want) {
			live++
		}
	}
	if live < n {
		t.Fatalf("%s acknowledged after %s stopped has %d live copies, want %d (locations %+v)", id, down, live, n, locs)
	}
}
