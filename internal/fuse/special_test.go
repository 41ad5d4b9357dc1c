package fuse

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
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
