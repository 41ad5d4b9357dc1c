package testcluster_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/fid"
)

// ackedWrites are the writes a fault test's clients had acknowledged:
// once the fault is over, each must be on every copy.
type ackedWrites struct {
	t  *testing.T
	mu sync.Mutex
	m  map[fid.FileID][]byte
}

func newAckedWrites(t *testing.T) *ackedWrites {
	return &ackedWrites{t: t, m: map[fid.FileID][]byte{}}
}

// put writes body into collection through cl and keeps it if acknowledged.
// A write must be answered well within the forward timeout plus the
// client's retries; a hang fails the test here, not at its end.
func (a *ackedWrites) put(cl *client.Client, collection string, body []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, _, err := cl.PutBytes(ctx, client.AssignRequest{Collection: collection}, body, client.UploadOptions{})
	if ctx.Err() != nil {
		a.t.Errorf("a %s write was not answered within 30s: %v", collection, err)
	}
	if err == nil {
		a.add(id, body)
	}
	return err
}

func (a *ackedWrites) add(id fid.FileID, body []byte) {
	a.mu.Lock()
	a.m[id] = body
	a.mu.Unlock()
}

func (a *ackedWrites) snapshot() map[fid.FileID][]byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.m)
}

// missing names the first acknowledged write that cl's master does not list
// on copies copies, or that one of them does not hold; "" when none.
func (a *ackedWrites) missing(cl *client.Client, copies int) string {
	ctx := context.Background()
	for id, want := range a.snapshot() {
		cl.Invalidate(id.Volume)
		locs, err := cl.Lookup(ctx, id.Volume)
		if err != nil || len(locs) != copies {
			return fmt.Sprintf("volume %d: %d copies listed (%v)", id.Volume, len(locs), err)
		}
		for _, l := range locs {
			status, got, err := readFrom(l.URL, id)
			if err != nil || status != http.StatusOK || !bytes.Equal(got, want) {
				return fmt.Sprintf("%s on %s: %d %v", id, l.URL, status, err)
			}
		}
	}
	return ""
}
