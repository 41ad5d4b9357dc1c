package testcluster_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/testcluster"
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
// holding copies while writers run: only writes in flight may fail, and every
// acknowledged write is readable afterwards from a surviving copy.
func TestReplicaLossDuringWritesLosesNoAcknowledgedWrite(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Volumes: twoByTwoByTwo(), Fsync: true})
	cl, err := client.New(client.Config{Masters: c.MasterAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		acked  = map[fid.FileID][]byte{}
		failed atomic.Int64
		seq    atomic.Int64
	)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	const writers = 8
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				body := []byte(fmt.Sprintf("payload %d", seq.Add(1)))
				id, _, err := cl.PutBytes(ctx, client.AssignRequest{Replication: "010"}, body, client.UploadOptions{})
				if err != nil {
					if ctx.Err() == nil {
						failed.Add(1)
					}
					continue
				}
				mu.Lock()
				acked[id] = body
				mu.Unlock()
			}
		}()
	}
	time.Sleep(700 * time.Millisecond)
	victim := c.Volume[0]
	victim.Stop()
	time.Sleep(2 * time.Second)
	cancel()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if len(acked) < 50 {
		t.Fatalf("only %d writes acknowledged", len(acked))
	}
	// The client retries on a new assignment, so a lost replica costs at most
	// the writes that were in flight on it.
	if f := failed.Load(); f > writers {
		t.Errorf("%d writes failed after retries; want at most the %d in flight", f, writers)
	}
	for id, want := range acked {
		rc, _, err := cl.Get(context.Background(), id, nil)
		if err != nil {
			t.Fatalf("acknowledged %s unreadable with %s down: %v", id, victim.Addr, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("acknowledged %s reads %q, want %q (err %v)", id, got, want, err)
		}
	}
	t.Logf("%d writes acknowledged, %d failed, all readable with one server down", len(acked), failed.Load())
}
