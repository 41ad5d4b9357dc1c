package fuse

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/filer"
)

// Directories that an older filer created in one transaction share a
// creation time, and so an inode number (internal/crtime). Through the
// mount, the inner one is still a directory of its own: it lists, its file
// reads, and its inode number differs from its parent's. (It was ELOOP, and
// a listing made the mount walk a loop of nodes until it ran out of memory.)
func TestDirectoriesSharingACreationTimeDoNotLoop(t *testing.T) {
	needFUSE(t)
	s := startFiler(t)
	ctx := context.Background()
	same := time.Unix(1_700_000_000, 42)
	for _, e := range []*filer.Entry{
		{Path: "/x", Mode: os.ModeDir | 0o755, Crtime: same},
		{Path: "/x/y", Mode: os.ModeDir | 0o755, Crtime: same},
		{Path: "/x/y/z", Mode: os.ModeDir | 0o755, Crtime: same},
	} {
		if err := s.Filer().CreateEntry(ctx, e, filer.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Filer().WriteFile(ctx, "/x/y/z/f", strings.NewReader("deep"), filer.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := mount(t, s)
	names, err := os.ReadDir(filepath.Join(dir, "x", "y"))
	if err != nil || len(names) != 1 || names[0].Name() != "z" {
		t.Fatalf("listing x/y: %v %v", names, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "x", "y", "z", "f")); err != nil || string(b) != "deep" {
		t.Fatalf("reading x/y/z/f: %q %v", b, err)
	}
	inos := map[uint64]string{}
	for _, p := range []string{"x", "x/y", "x/y/z"} {
		if err := os.Chmod(filepath.Join(dir, p), 0o750); err != nil { // its attributes asked anew
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		ino := fi.Sys().(*syscall.Stat_t).Ino
		if other, ok := inos[ino]; ok {
			t.Fatalf("%s and %s have one inode number, %d", other, p, ino)
		}
		inos[ino] = p
	}
}
