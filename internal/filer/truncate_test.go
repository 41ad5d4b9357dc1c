package filer

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

func TestTruncate(t *testing.T) {
	e := newEnv(t, Config{ChunkSize: 1024, ManifestThreshold: 2, ManifestBatch: 2})
	ctx := context.Background()
	ref := make([]byte, 3000)
	for i := range ref {
		ref[i] = byte(i%251 + 1)
	}
	e.write(t, "/f", ref)
	check := func(step string) {
		t.Helper()
		if got := e.read(t, "/f"); !bytes.Equal(got, ref) {
			t.Fatalf("%s: %d bytes read, want %d (first difference at %d)", step, len(got), len(ref), firstDiff(got, ref))
		}
		e.checkNoLeak(t)
	}
	// Overlapping chunks: a range write shadows part of two chunks.
	patch := bytes.Repeat([]byte{'X'}, 800)
	if _, err := e.f.WriteAt(ctx, "/f", 500, bytes.NewReader(patch), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	copy(ref[500:], patch)
	check("patched")

	for _, size := range []int64{1500, 4000, 2000, 1024, 0, 10} {
		if _, err := e.f.Truncate(ctx, "/f", size); err != nil {
			t.Fatalf("truncate to %d: %v", size, err)
		}
		if int(size) <= len(ref) {
			ref = ref[:size]
		} else {
			ref = append(ref, make([]byte, int(size)-len(ref))...)
		}
		check("truncated")
	}
	ent, err := e.f.FindEntry(ctx, "/f")
	if err != nil || ent.Size != 10 || ent.ETag() == "" {
		t.Fatalf("entry after truncating: %+v %v", ent, err)
	}

	if _, err := e.f.Truncate(ctx, "/f", -1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative size: %v", err)
	}
	if _, err := e.f.Truncate(ctx, "/missing", 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing file: %v", err)
	}
	if err := e.f.Mkdir(ctx, "/d", 0o755, false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.f.Truncate(ctx, "/d", 1); !errors.Is(err, ErrIsDir) {
		t.Fatalf("directory: %v", err)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
