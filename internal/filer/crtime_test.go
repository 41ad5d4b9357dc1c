package filer

import (
	"context"
	"os"
	"testing"
	"time"
)

// Entries one transaction creates get distinct creation times, also with
// a clock that does not move: a mount numbers inodes by them, and the
// directories a/ and a/b/ of one create numbered alike were one inode to
// the kernel (internal/crtime).
func TestEntriesCreatedTogetherHaveDistinctCreationTimes(t *testing.T) {
	frozen := time.Unix(1_700_000_000, 0)
	e := newEnv(t, Config{Now: func() time.Time { return frozen }})
	ctx := context.Background()
	if err := e.f.CreateEntry(ctx, &Entry{Path: "/a/b/c/f", Mode: 0o644}, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := e.f.Atomically(ctx, func(b Batch) error {
		for _, p := range []string{"/a/g", "/a/h"} {
			if err := b.Create(&Entry{Path: p, Mode: 0o644}, CreateOptions{}); err != nil {
				return err
			}
		}
		return b.Create(&Entry{Path: "/a/d", Mode: os.ModeDir | 0o755}, CreateOptions{})
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]string{}
	for _, p := range []string{"/a", "/a/b", "/a/b/c", "/a/b/c/f", "/a/g", "/a/h", "/a/d"} {
		got, err := e.f.FindEntry(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		n := got.Crtime.UnixNano()
		if other, ok := seen[n]; ok {
			t.Fatalf("%s and %s were both created at %d", other, p, n)
		}
		if got.Crtime.Before(frozen) {
			t.Fatalf("%s created at %v, before the clock's %v", p, got.Crtime, frozen)
		}
		seen[n] = p
	}
}
