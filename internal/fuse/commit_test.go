package fuse

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Files closed on one mount are committed in the background: the same
// mount reads them (and the mode set after closing, as tar does) at once,
// and after an fsync of their directory another mount reads them too.
func TestClosedFilesCommitInTheBackground(t *testing.T) {
	needFUSE(t)
	s := startFiler(t)
	m1, m2 := mount(t, s), mount(t, s)
	dir := filepath.Join(m1, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	content := func(i int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("file %d;", i)), 100+i) }
	const n = 40
	for i := range n {
		p := filepath.Join(dir, fmt.Sprint(i))
		if err := os.WriteFile(p, content(i), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		p := filepath.Join(dir, fmt.Sprint(i))
		if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, content(i)) {
			t.Fatalf("the writing mount reads %d: %d bytes, %v", i, len(b), err)
		}
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != int64(len(content(i))) {
			t.Fatalf("the writing mount stats %d: %v %v", i, fi, err)
		}
	}
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil { // FSYNCDIR: every pending commit done
		t.Fatal(err)
	}
	d.Close()
	for i := range n {
		p := filepath.Join(m2, "d", fmt.Sprint(i))
		if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, content(i)) {
			t.Fatalf("the other mount reads %d after fsync of the directory: %d bytes, %v", i, len(b), err)
		}
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("the other mount stats %d: %v %v", i, fi, err)
		}
	}
	// Unlink and rename right after close act on the committed file.
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(a, []byte("to rename"), 0o644)
	if err := os.Rename(a, b); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(a, []byte("to remove"), 0o644)
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(m2, "d", "a")); !os.IsNotExist(err) {
		t.Fatalf("a removed right after close: the other mount stats %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(m2, "d", "b")); err != nil || string(got) != "to rename" {
		t.Fatalf("renamed right after close: the other mount reads %q, %v", got, err)
	}
}
