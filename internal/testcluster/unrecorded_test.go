package testcluster_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/testcluster"
	"github.com/kelpfs/kelp/internal/testutil"
)

// TestShortWriteWithoutMasterIsNotAcknowledged: under the degraded policy
// a write that reaches fewer copies than its replication is acknowledged
// only once a master has recorded which copies have it. With dc2 down and
// then the master gone, the volume server refuses it with a 503 (it was a
// 500: no master to look the copies up is the cluster's state, not a
// bug). The refusal comes from the lookup of the copies here; a report
// that fails after a successful lookup (ErrShortWriteUnrecorded) is not
// reached by this test.
func TestShortWriteWithoutMasterIsNotAcknowledged(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Volumes: twoDataCenters(), PulseInterval: 500 * time.Millisecond})
	m := c.Leader().Addr
	configure(t, m, url.Values{"collection": {"deg"}, "replication": {"100"}, "writePolicy": {"degraded"}, "minCopies": {"1"}})
	cl, err := client.New(client.Config{Masters: c.MasterAddrs(), MasterWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	deg := client.AssignRequest{Collection: "deg"}
	if _, _, err := cl.PutBytes(ctx, deg, []byte("both up"), client.UploadOptions{}); err != nil {
		t.Fatal(err)
	}
	c.StopDataCenter("dc2")
	waitServers(t, m, 2)
	var a client.Assignment
	testutil.WaitFor(t, 20*time.Second, func() bool {
		// Two file ids; a degraded write of the first, which the master
		// records (and which shows the volume server where the copies are).
		if a, err = cl.Assign(ctx, client.AssignRequest{Collection: "deg", Count: 2}); err != nil {
			return false
		}
		_, err = cl.Upload(ctx, a.URL, a.FID, bytes.NewReader([]byte("recorded")), 8, client.UploadOptions{})
		return err == nil
	}, "no degraded write without dc2")

	c.Master.Kill()
	id := a.FID
	id.Key++ // the second of the two keys
	_, err = cl.Upload(ctx, a.URL, id, bytes.NewReader([]byte("unrecorded")), 10, client.UploadOptions{})
	var he *client.HTTPError
	if !errors.As(err, &he) || he.Status != http.StatusServiceUnavailable || !strings.Contains(he.Message, "master") {
		t.Fatalf("a write short of copies with no master: %v, want 503 naming the missing master", err)
	}
}
