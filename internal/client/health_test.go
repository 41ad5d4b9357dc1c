package client_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/client/clienttest"
	"github.com/kelpfs/kelp/internal/fid"
)

// Issue 8: with dc1 paused every read took about 2.3 s, because the frozen
// copy was tried first each time. A frozen replica (it accepts connections,
// never answers) costs one short wait, once; later reads go to the healthy
// replica first; when it answers again it is read from again.
func TestFrozenReplicaCostsOneShortWaitOnce(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Servers: 2, Volumes: 1, Replicas: 2})
	const failover = 300 * time.Millisecond
	c := newClient(t, client.Config{Masters: []string{cl.Master.URL}, FailoverAfter: failover})
	ctx := context.Background()
	var ids []fid.FileID
	for i := 0; i < 20; i++ {
		id, _, err := c.PutBytes(ctx, client.AssignRequest{}, []byte(fmt.Sprint("file ", i)), client.UploadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	frozen, healthy := cl.Servers[0], cl.Servers[1] // the lookup lists Servers[0] first
	readEach := func() time.Duration {
		t.Helper()
		start := time.Now()
		for i, id := range ids {
			rc, _, err := c.Get(ctx, id, nil)
			if err != nil {
				t.Fatalf("get %s: %v", id, err)
			}
			if got := readAll(t, rc); string(got) != fmt.Sprint("file ", i) {
				t.Fatalf("read %q", got)
			}
		}
		return time.Since(start)
	}
	readEach() // warm: connections, lookups
	frozen.Freeze(t)
	before := healthy.Reads.Load()
	d := readEach()
	if d < failover || d > failover+time.Second {
		t.Fatalf("%d reads with one frozen replica took %v, want one wait of %v and fast reads", len(ids), d, failover)
	}
	if got := healthy.Reads.Load() - before; got != int64(len(ids)) {
		t.Fatalf("healthy replica served %d reads, want %d", got, len(ids))
	}
	if d := readEach(); d > failover {
		t.Fatalf("reads took %v once the frozen replica was known", d)
	}
	// Only the first read and the background probes touched the frozen port.
	if n := frozen.FrozenConns(); n > 4 {
		t.Fatalf("the frozen server was contacted %d times", n)
	}

	// Back to life: a probe notices, and reads use it again.
	frozen.Thaw(t)
	deadline := time.Now().Add(10 * time.Second)
	for frozen.Reads.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the thawed server is never read from again")
		}
		readEach()
		time.Sleep(20 * time.Millisecond)
	}
}

// A read that has no other replica to turn to waits the full AnswerTimeout
// for the last one, not the short FailoverAfter.
func TestLastReplicaGetsTheFullAnswerTimeout(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Servers: 1, Volumes: 1})
	c := newClient(t, client.Config{Masters: []string{cl.Master.URL}, FailoverAfter: 50 * time.Millisecond})
	id, _, err := c.PutBytes(context.Background(), client.AssignRequest{}, []byte("slow"), client.UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	cl.Servers[0].SetHook(func(w http.ResponseWriter, r *http.Request) bool {
		<-release
		return false
	})
	time.AfterFunc(300*time.Millisecond, func() { close(release) })
	rc, _, err := c.Get(context.Background(), id, nil)
	if err != nil {
		t.Fatalf("slow single replica: %v", err)
	}
	if got := readAll(t, rc); string(got) != "slow" {
		t.Fatalf("read %q", got)
	}
}
