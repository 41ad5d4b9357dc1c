package objectapi

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"sync/atomic"
	"testing"

	"github.com/kelpfs/kelp/internal/chunk/chunktest"
	"github.com/kelpfs/kelp/internal/filer"
	"github.com/kelpfs/kelp/internal/filer/store"
	"github.com/kelpfs/kelp/internal/filer/store/pebble"
)

// lostAckStore commits an Update and then, when armed, reports a failure,
// as a database connection that breaks while COMMIT's answer is on its way:
// the caller cannot know whether its transaction was committed.
type lostAckStore struct {
	store.Store
	armed atomic.Bool
}

func (s *lostAckStore) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	if err := s.Store.Update(ctx, fn); err != nil {
		return err
	}
	if s.armed.CompareAndSwap(true, false) {
		return errors.New("connection reset by peer while reading the COMMIT answer")
	}
	return nil
}

// TestCompleteWithUncertainCommitKeepsTheManifest: when the commit of a
// completion fails in a way that leaves its outcome unknown, the object may
// exist; deleting the manifest blobs it points to (as after a definite
// failure) would leave a committed object that cannot be read.
func TestCompleteWithUncertainCommitKeepsTheManifest(t *testing.T) {
	ctx := context.Background()
	l, st := newLostAckLayer(t)
	id, err := l.CreateMultipartUpload(ctx, "bkt", "big", Metadata{}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	// More than 1000 chunks in all, so the completion packs them into manifests.
	var want []byte
	var list []CompletePart
	for n := 1; n <= 2; n++ {
		part := bytes.Repeat([]byte{byte('a' + n)}, 600*256)
		pi, err := l.UploadPart(ctx, "bkt", "big", id, n, bytes.NewReader(part), PartOptions{Size: int64(len(part))})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, part...)
		list = append(list, CompletePart{Number: n, ETag: pi.ETag})
	}
	st.armed.Store(true)
	if _, err := l.CompleteMultipartUpload(ctx, "bkt", "big", id, list, CompleteOptions{}); err == nil {
		t.Fatal("completion succeeded although its commit reported a failure")
	}
	mustReadObject(t, l, "big", want)
}

// TestUploadPartWithUncertainCommitKeepsItsChunks: the same for a part,
// which a completion may then use by its ETag.
func TestUploadPartWithUncertainCommitKeepsItsChunks(t *testing.T) {
	ctx := context.Background()
	l, st := newLostAckLayer(t)
	id, err := l.CreateMultipartUpload(ctx, "bkt", "obj", Metadata{}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	part := bytes.Repeat([]byte("p"), 1000)
	st.armed.Store(true)
	if _, err := l.UploadPart(ctx, "bkt", "obj", id, 1, bytes.NewReader(part), PartOptions{Size: int64(len(part))}); err == nil {
		t.Fatal("upload succeeded although its commit reported a failure")
	}
	sum := md5.Sum(part)
	if _, err := l.CompleteMultipartUpload(ctx, "bkt", "obj", id, []CompletePart{{Number: 1, ETag: hex.EncodeToString(sum[:])}}, CompleteOptions{}); err != nil {
		t.Fatal(err)
	}
	mustReadObject(t, l, "obj", part)
}

func newLostAckLayer(t testing.TB) (*Layer, *lostAckStore) {
	ctx := context.Background()
	pst, err := pebble.Open(t.TempDir(), &pebble.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	st := &lostAckStore{Store: pst}
	blobs := chunktest.New()
	f, err := filer.New(filer.Config{Store: st, Blobs: blobs, ChunkSize: 256, GCDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close(); pst.Close() })
	l, err := New(Config{Namespace: f, MinPartSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	return l, st
}

func mustReadObject(t *testing.T, l *Layer, key string, want []byte) {
	t.Helper()
	o, err := l.GetObject(context.Background(), "bkt", key, GetOptions{})
	if err != nil {
		t.Fatalf("the commit happened, but: %v", err)
	}
	defer o.Body.Close()
	got, err := io.ReadAll(o.Body)
	if err != nil {
		t.Fatalf("reading the committed object: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, want %d", len(got), len(want))
	}
}

// TestPutWithUncertainCommitKeepsItsChunks: the same for a plain PUT, whose
// entry may be committed although the commit's answer was lost.
func TestPutWithUncertainCommitKeepsItsChunks(t *testing.T) {
	l, st := newLostAckLayer(t)
	body := bytes.Repeat([]byte("o"), 1000)
	st.armed.Store(true)
	if _, err := l.PutObject(context.Background(), "bkt", "put", bytes.NewReader(body), PutOptions{Size: int64(len(body))}); err == nil {
		t.Fatal("put succeeded although its commit reported a failure")
	}
	mustReadObject(t, l, "put", body)
}
