package fuse

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// checkSpecialFiles makes a character device, a block device and a socket
// in dir (on a mount): each keeps its type, mode and device number; a
// device does not open (the mount is nodev), and a Unix socket bound there
// takes connections.
func checkSpecialFiles(t *testing.T, dir string) {
	t.Helper()
	for _, d := range []struct {
		name string
		typ  uint32
		rdev int
	}{
		{"chr", syscall.S_IFCHR, 0x0101},
		{"blk", syscall.S_IFBLK, 0x0802},
	} {
		p := filepath.Join(dir, d.name)
		if err := syscall.Mknod(p, d.typ|0o640, d.rdev); err != nil {
			t.Fatalf("mknod %s: %v", d.name, err)
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode != d.typ|0o640 || st.Rdev != uint64(d.rdev) {
			t.Fatalf("%s: mode %o rdev %#x, want %o and %#x", d.name, st.Mode, st.Rdev, d.typ|0o640, d.rdev)
		}
		if f, err := os.Open(p); err == nil {
			f.Close()
			t.Fatalf("%s opened on a nodev mount", d.name)
		}
	}
	sock := filepath.Join(dir, "sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("binding a Unix socket on the mount: %v", err)
	}
	defer ln.Close()
	if fi, err := os.Lstat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("the socket's file: %v (%v)", fi, err)
	}
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, err = c.Write([]byte("k"))
			c.Close()
		}
		accepted <- err
	}()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("connecting to the socket on the mount: %v", err)
	}
	buf := make([]byte, 1)
	if _, err := c.Read(buf); err != nil || buf[0] != 'k' {
		t.Fatalf("reading from the socket: %q %v", buf, err)
	}
	c.Close()
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
}

// TestFallocateThroughTheMount: fallocate(2) sets the size (mode 0), keeps
// it (FALLOC_FL_KEEP_SIZE), and punches holes and zeroes ranges that read
// as zeros; the modes that move data are EOPNOTSUPP.
func TestFallocateThroughTheMount(t *testing.T) {
	needFUSE(t)
	s := startFiler(t)
	m := mount(t, s)
	p := filepath.Join(m, "f")
	if err := os.WriteFile(p, bytes.Repeat([]byte("x"), 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	want := bytes.Repeat([]byte("x"), 8192)
	check := func(step string) {
		t.Helper()
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: the file reads %d bytes, want %d (first difference at %d)", step, len(got), len(want), firstDiff(got, want))
		}
	}
	if err := unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 1000, 3000); err != nil {
		t.Fatalf("punching a hole: %v", err)
	}
	copy(want[1000:4000], make([]byte, 3000))
	check("a punched hole")
	if err := unix.Fallocate(fd, unix.FALLOC_FL_ZERO_RANGE, 6000, 4000); err != nil {
		t.Fatalf("zeroing a range past the end: %v", err)
	}
	want = append(want[:6000], make([]byte, 4000)...)
	check("a zeroed range")
	if err := unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 0, 1<<20); err != nil {
		t.Fatalf("preallocating, keeping the size: %v", err)
	}
	check("a preallocation keeping the size")
	if err := unix.Fallocate(fd, 0, 0, 20000); err != nil {
		t.Fatalf("preallocating: %v", err)
	}
	want = append(want, make([]byte, 10000)...)
	check("a preallocation")
	if err := unix.Fallocate(fd, unix.FALLOC_FL_COLLAPSE_RANGE, 0, 4096); err != unix.EOPNOTSUPP {
		t.Fatalf("collapsing a range: %v, want EOPNOTSUPP", err)
	}
	check("a refused collapse")
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestSetgidDirectoryGivesItsGroup: what is made in a directory with the
// setgid bit takes the directory's group, and a directory made there the
// setgid bit too, as on a local file system.
func TestSetgidDirectoryGivesItsGroup(t *testing.T) {
	needFUSE(t)
	s := startFiler(t)
	m := mount(t, s)
	d := filepath.Join(m, "shared")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	const group = 1234
	if err := os.Chown(d, 0, group); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o775|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	in := func(name string) string { return filepath.Join(d, name) }
	for _, make := range []func() error{
		func() error { return os.WriteFile(in("file"), nil, 0o644) },
		func() error { return os.Mkdir(in("dir"), 0o755) },
		func() error { return os.Symlink("file", in("link")) },
		func() error { return syscall.Mkfifo(in("fifo"), 0o644) },
	} {
		if err := make(); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"file", "dir", "link", "fifo"} {
		var st syscall.Stat_t
		if err := syscall.Lstat(in(name), &st); err != nil {
			t.Fatal(err)
		}
		if st.Gid != group {
			t.Fatalf("%s has group %d, want the directory's %d", name, st.Gid, group)
		}
		if isDir := name == "dir"; isDir != (st.Mode&syscall.S_ISGID != 0) {
			t.Fatalf("%s: mode %o: only the directory made there takes the setgid bit", name, st.Mode)
		}
	}
}
