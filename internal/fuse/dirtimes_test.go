package fuse

import (
	"archive/tar"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestDirectoryTimesThroughTheMount: every change of the names in a
// directory moves its mtime and ctime (POSIX), seen by stat(2) right after
// the change; and tar's extraction keeps the directory mtimes of the
// archive, which it sets after filling each directory.
func TestDirectoryTimesThroughTheMount(t *testing.T) {
	needFUSE(t)
	s := startFiler(t)
	m := mount(t, s)
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	d := filepath.Join(m, "d")
	in := func(name string) string { return filepath.Join(d, name) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(d, 0o755))
	must(os.WriteFile(in("file"), nil, 0o644))
	must(os.Mkdir(in("empty"), 0o755))
	must(os.Mkdir(filepath.Join(m, "elsewhere"), 0o755))
	for _, op := range []struct {
		name string
		do   func() error
	}{
		{"create", func() error { return os.WriteFile(in("new"), []byte("x"), 0o644) }},
		{"mkdir", func() error { return os.Mkdir(in("sub"), 0o755) }},
		{"symlink", func() error { return os.Symlink("file", in("sym")) }},
		{"link", func() error { return os.Link(in("file"), in("hard")) }},
		{"mkfifo", func() error { return syscall.Mkfifo(in("fifo"), 0o644) }},
		{"unlink", func() error { return os.Remove(in("new")) }},
		{"rmdir", func() error { return os.Remove(in("empty")) }},
		{"rename within", func() error { return os.Rename(in("sym"), in("sym2")) }},
		{"rename out", func() error { return os.Rename(in("sym2"), filepath.Join(m, "elsewhere", "sym")) }},
		{"rename in", func() error { return os.Rename(filepath.Join(m, "elsewhere", "sym"), in("back")) }},
	} {
		must(os.Chtimes(d, old, old))
		before := time.Now()
		if err := op.do(); err != nil {
			t.Fatalf("%s: %v", op.name, err)
		}
		var st syscall.Stat_t
		must(syscall.Stat(d, &st))
		mtime, ctime := time.Unix(st.Mtim.Unix()), time.Unix(st.Ctim.Unix())
		if mtime.Before(before) || ctime.Before(before) {
			t.Fatalf("%s: the directory has mtime %v, ctime %v; want both at or after %v", op.name, mtime, ctime, before)
		}
	}

	// tar sets each directory's mtime once it has extracted what is in it
	// (on the local disk as here: the archive is extracted to both).
	var archive bytes.Buffer
	tw := tar.NewWriter(&archive)
	dirTime := time.Date(2011, 2, 3, 4, 5, 6, 0, time.UTC)
	for _, name := range []string{"t/", "t/a", "t/b", "t/inner/", "t/inner/c"} {
		if name[len(name)-1] == '/' {
			must(tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: dirTime}))
			continue
		}
		must(tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: 1, ModTime: time.Now()}))
		_, err := tw.Write([]byte("z"))
		must(err)
	}
	must(tw.Close())
	local := t.TempDir()
	for _, into := range []string{local, m} {
		cmd := exec.Command("tar", "-xf", "-", "-C", into)
		cmd.Stdin = bytes.NewReader(archive.Bytes())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("tar -x into %s: %v\n%s", into, err, out)
		}
	}
	root, err := os.Open(m)
	must(err)
	must(root.Sync()) // the background commits done: a fresh mount asks the filer
	root.Close()
	fresh := mount(t, s)
	for _, dir := range []string{"t", "t/inner"} {
		for _, mm := range []string{local, m, fresh} {
			fi, err := os.Stat(filepath.Join(mm, dir))
			must(err)
			if !fi.ModTime().Equal(dirTime) {
				t.Fatalf("%s after tar -x: mtime %v, want the archive's %v", filepath.Join(mm, dir), fi.ModTime(), dirTime)
			}
		}
	}
}
