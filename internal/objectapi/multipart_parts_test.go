package objectapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/chunk/chunktest"
	"github.com/kelpfs/kelp/internal/filer"
	"github.com/kelpfs/kelp/internal/testutil"
)

// A part uploaded several times at once counts once, with one of the
// uploads, and the blobs of the others are collected: nothing leaks.
func TestPartUploadedConcurrentlyLeavesNoBlobs(t *testing.T) {
	ctx := context.Background()
	l, _ := newLostAckLayer(t)
	blobs := l.ns.Blobs().(*chunktest.Mem)
	id, err := l.CreateMultipartUpload(ctx, "bkt", "k", Metadata{}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := bytes.Repeat([]byte{byte('a' + i)}, 1000)
			if _, err := l.UploadPart(ctx, "bkt", "k", id, 1, bytes.NewReader(body), PartOptions{Size: 1000}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	res, err := l.ListParts(ctx, "bkt", "k", id, 0, 100)
	if err != nil || len(res.Parts) != 1 {
		t.Fatalf("%v %+v", err, res)
	}
	if n := len(blobs.Live()); n != 4 { // 1000 bytes in 256-byte chunks
		t.Fatalf("%d blobs live after eight uploads of one part, want the last one's 4", n)
	}
	oi, err := l.CompleteMultipartUpload(ctx, "bkt", "k", id, []CompletePart{{Number: 1, ETag: res.Parts[0].ETag}}, CompleteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if oi.Size != 1000 || len(blobs.Live()) != 4 {
		t.Fatalf("object of %d bytes, %d blobs live", oi.Size, len(blobs.Live()))
	}
}

// A part uploaded again while the upload completes: either the completion
// commits the part it was given and the late upload finds no upload, or
// the completion sees the part replaced and refuses; either way the object
// (if any) is readable and no blob leaks.
func TestPartReplacedDuringCompletion(t *testing.T) {
	ctx := context.Background()
	l, _ := newLostAckLayer(t)
	blobs := l.ns.Blobs().(*chunktest.Mem)
	for round := range 10 {
		key := fmt.Sprintf("k%d", round)
		id, err := l.CreateMultipartUpload(ctx, "bkt", key, Metadata{}, "", "")
		if err != nil {
			t.Fatal(err)
		}
		first := bytes.Repeat([]byte("1"), 1000)
		pi, err := l.UploadPart(ctx, "bkt", key, id, 1, bytes.NewReader(first), PartOptions{Size: 1000})
		if err != nil {
			t.Fatal(err)
		}
		var cerr, uerr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, cerr = l.CompleteMultipartUpload(ctx, "bkt", key, id, []CompletePart{{Number: 1, ETag: pi.ETag}}, CompleteOptions{})
		}()
		go func() {
			defer wg.Done()
			_, uerr = l.UploadPart(ctx, "bkt", key, id, 1, bytes.NewReader(bytes.Repeat([]byte("2"), 1000)), PartOptions{Size: 1000})
		}()
		wg.Wait()
		switch {
		case cerr == nil:
			mustReadObject(t, l, key, first)
			if uerr != nil && !errors.Is(uerr, ErrNoSuchUpload) {
				t.Fatalf("round %d: late part: %v", round, uerr)
			}
		case errors.Is(cerr, ErrInvalidPart) && uerr == nil:
			if err := l.AbortMultipartUpload(ctx, "bkt", key, id); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("round %d: completion %v, part %v", round, cerr, uerr)
		}
		if err := l.DeleteObject(ctx, "bkt", key); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 30*time.Second, func() bool { return len(blobs.Live()) == 0 },
		"blobs left after every object was deleted: %v", blobs.Live())
}

// A completed upload is remembered for CompletedUploadTTL: a repeated
// completion answers the first result, and after the lifecycle pass past
// that time the record is gone.
func TestCompletedUploadIsForgotten(t *testing.T) {
	ctx := context.Background()
	l, _ := newLostAckLayer(t)
	id, err := l.CreateMultipartUpload(ctx, "bkt", "k", Metadata{}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	pi, err := l.UploadPart(ctx, "bkt", "k", id, 1, bytes.NewReader([]byte("part")), PartOptions{Size: 4})
	if err != nil {
		t.Fatal(err)
	}
	list := []CompletePart{{Number: 1, ETag: pi.ETag}}
	first, err := l.CompleteMultipartUpload(ctx, "bkt", "k", id, list, CompleteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := l.CompleteMultipartUpload(ctx, "bkt", "k", id, list, CompleteOptions{})
	if err != nil || again.ETag != first.ETag {
		t.Fatalf("repeated completion: %v %+v, first %+v", err, again, first)
	}
	if _, err := l.CompleteMultipartUpload(ctx, "bkt", "other", id, list, CompleteOptions{}); !errors.Is(err, ErrNoSuchUpload) {
		t.Fatalf("completion of the id under another key: %v", err)
	}
	if _, err := l.ApplyLifecycle(ctx, time.Now().Add(CompletedUploadTTL-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.CompleteMultipartUpload(ctx, "bkt", "k", id, list, CompleteOptions{}); err != nil {
		t.Fatalf("forgotten before its time: %v", err)
	}
	if _, err := l.ApplyLifecycle(ctx, time.Now().Add(CompletedUploadTTL+time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.CompleteMultipartUpload(ctx, "bkt", "k", id, list, CompleteOptions{}); !errors.Is(err, ErrNoSuchUpload) {
		t.Fatalf("remembered past its time: %v", err)
	}
	if _, err := l.ns.FindEntry(ctx, l.completedDir("bkt")); !errors.Is(err, filer.ErrNotFound) {
		t.Fatalf("the emptied records directory stays: %v", err)
	}
}
