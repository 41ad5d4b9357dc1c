package objectapi

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/chunk/chunktest"
	"github.com/kelpfs/kelp/internal/filer"
	"github.com/kelpfs/kelp/internal/filer/store/pebble"
)

// staleNamespace answers FindEntry as if nothing existed, as a read that
// races with another writer would: a write's early check passes and only
// the check in its transaction sees the object.
type staleNamespace struct{ *filer.Filer }

func (n staleNamespace) FindEntry(ctx context.Context, p string) (*filer.Entry, error) {
	if strings.HasSuffix(p, "/bkt/k") {
		return nil, filer.ErrNotFound
	}
	return n.Filer.FindEntry(ctx, p)
}

// A conditional write refused in its transaction (after its data was
// stored) deletes that data: the refusal is certain, not a store failure.
func TestWriteRefusedInTransactionLeavesNoBlobs(t *testing.T) {
	ctx := context.Background()
	pst, err := pebble.Open(t.TempDir(), &pebble.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	blobs := chunktest.New()
	f, err := filer.New(filer.Config{Store: pst, Blobs: blobs, ChunkSize: 256, GCDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close(); pst.Close() })
	l, err := New(Config{Namespace: f})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("o"), 1000)
	if _, err := l.PutObject(ctx, "bkt", "k", bytes.NewReader(body), PutOptions{Size: 1000}); err != nil {
		t.Fatal(err)
	}
	before := len(blobs.Live())
	sum := md5.Sum(body)
	stale, err := New(Config{Namespace: staleNamespace{f}})
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range []PutOptions{{IfNoneMatch: "*"}, {IfMatch: `"nope"`}, {IfNoneMatch: `"` + hex.EncodeToString(sum[:]) + `"`},
		{IfUnmodifiedSince: time.Now().Add(-time.Hour)}} {
		opts.Size = 1000
		if _, err := stale.PutObject(ctx, "bkt", "k", bytes.NewReader(body), opts); err == nil {
			t.Fatalf("%+v: the write was not refused", opts)
		}
		if n := len(blobs.Live()); n != before {
			t.Fatalf("%+v: %d blobs live after the refused write, %d before", opts, n, before)
		}
	}
}

// If-Unmodified-Since compares to the second: an object written within
// the date's second was not modified after it.
func TestConditionalModifiedAfter(t *testing.T) {
	date := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		mtime, since time.Time
		want         bool
	}{
		{date.Add(700 * time.Millisecond), date, false},
		{date, date, false},
		{date.Add(time.Second), date, true},
		{date.Add(-time.Hour), date, false},
		{date.Add(time.Hour), time.Time{}, false}, // absent condition
	}
	for _, tc := range cases {
		if got := modifiedAfter(tc.mtime, tc.since); got != tc.want {
			t.Errorf("modifiedAfter(%s, %s) = %v, want %v", tc.mtime, tc.since, got, tc.want)
		}
	}
}
