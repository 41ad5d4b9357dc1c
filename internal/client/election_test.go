package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/testcluster"
)

// Issue 8: the filer gave up on a write 86 ms after the leading master died,
// while an election takes about half a second. A write issued right after
// the leader is killed must wait for the new leader and succeed.
func TestPutSurvivesLeaderElection(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-master cluster")
	}
	c := testcluster.Start(t, testcluster.Options{
		Masters: 3,
		Volumes: []testcluster.VolumeSpec{{DataCenter: "dc1"}, {DataCenter: "dc2"}},
	})
	cl := newClient(t, client.Config{Masters: c.MasterAddrs()})
	ctx := context.Background()
	if _, _, err := cl.PutBytes(ctx, client.AssignRequest{}, []byte("before"), client.UploadOptions{}); err != nil {
		t.Fatal(err)
	}
	old := c.StopLeader() // the client's remembered master is gone
	start := time.Now()
	for i := 0; i < 5; i++ {
		data := []byte(fmt.Sprintf("during election %d", i))
		id, _, err := cl.PutBytes(ctx, client.AssignRequest{}, data, client.UploadOptions{})
		if err != nil {
			t.Fatalf("put %d, %v after the leader %s stopped: %v", i, time.Since(start), old.Addr, err)
		}
		rc, _, err := cl.Get(ctx, id, nil)
		if err != nil {
			t.Fatalf("get %d: %v", i, err)
		}
		if got := readAll(t, rc); string(got) != string(data) {
			t.Fatalf("read %q, want %q", got, data)
		}
	}
	t.Logf("first writes after the leader died took %v; new leader %s", time.Since(start), c.Leader().Addr)
}

// With every master gone the client gives up after Config.MasterWait with an
// error that says so, not at once and not never.
func TestMasterWaitIsBounded(t *testing.T) {
	dead := []string{deadAddr(t), deadAddr(t)}
	cl := newClient(t, client.Config{Masters: dead, MasterWait: 300 * time.Millisecond})
	start := time.Now()
	_, err := cl.Assign(context.Background(), client.AssignRequest{})
	d := time.Since(start)
	if !errors.Is(err, client.ErrNoMaster) {
		t.Fatalf("Assign with dead masters = %v, want ErrNoMaster", err)
	}
	if d < 150*time.Millisecond || d > 3*time.Second {
		t.Fatalf("gave up after %v, want about 300ms", d)
	}
	// A context deadline shorter than MasterWait wins.
	cl = newClient(t, client.Config{Masters: dead, MasterWait: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = cl.Lookup(ctx, 1)
	// The deadline may end a dial or a backoff pause (the error names the
	// deadline), or the client may give up at once when the deadline comes
	// before its next try (the error names the last failure).
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, client.ErrNoMaster) {
		t.Fatalf("Lookup = %v, want the deadline or ErrNoMaster", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Lookup took %v with a 200ms deadline", d)
	}
}
