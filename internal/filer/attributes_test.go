package filer

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// TestSetAttributesKeepsDataAndChecksCtime: SetAttributes changes only the
// attributes, never the stored data, and with ifCtime refuses an entry that
// changed since it was read.
func TestSetAttributesKeepsDataAndChecksCtime(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Config{ChunkSize: 1024})
	read := e.write(t, "/a/f", bytes.Repeat([]byte("x"), 3000))
	// A write after the caller read the entry: new data, new ctime.
	now := e.write(t, "/a/f", bytes.Repeat([]byte("y"), 2000))

	attrs := &Entry{Path: "/a/f", Mode: 0o600, UID: 7, GID: 8, Mtime: time.Unix(100, 5), Mime: "text/plain",
		Meta: map[string]string{"k": "v"}, Xattrs: map[string][]byte{"user.x": []byte("1")}}
	if err := e.f.SetAttributes(ctx, attrs, read.Ctime); !errors.Is(err, ErrChanged) {
		t.Fatalf("stale ctime: %v, want ErrChanged", err)
	}
	if err := e.f.SetAttributes(ctx, attrs, now.Ctime); err != nil {
		t.Fatal(err)
	}
	got, err := e.f.FindEntry(ctx, "/a/f")
	if err != nil {
		t.Fatal(err)
	}
	if got.Mode != 0o600 || got.UID != 7 || got.GID != 8 || !got.Mtime.Equal(attrs.Mtime) || got.Mime != "text/plain" ||
		got.Meta["k"] != "v" || string(got.Xattrs["user.x"]) != "1" {
		t.Errorf("attributes not set: %+v", got)
	}
	if got.Size != 2000 || !bytes.Equal(got.MD5, now.MD5) || len(got.Chunks) != len(now.Chunks) {
		t.Errorf("data changed: size %d", got.Size)
	}
	if b := e.read(t, "/a/f"); !bytes.Equal(b, bytes.Repeat([]byte("y"), 2000)) {
		t.Error("content changed")
	}
	if err := e.f.SetAttributes(ctx, &Entry{Path: "/a", Mode: 0o700}, time.Time{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a file's attributes on a directory: %v, want ErrInvalid", err)
	}
	if err := e.f.SetAttributes(ctx, &Entry{Path: "/a", Mode: os.ModeDir | 0o700}, time.Time{}); err != nil {
		t.Error(err)
	}
	e.checkNoLeak(t)
}
