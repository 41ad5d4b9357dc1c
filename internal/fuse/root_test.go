package fuse

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// The mount's root takes chmod, chown, utimens and extended attributes as
// any directory does (the filer stores the root's attributes), and another
// mount of the filer sees them: `chmod 1777` of a shared mount sticks.
func TestRootAttributesThroughTheMount(t *testing.T) {
	needFUSE(t)
	s := startFiler(t)
	m := mount(t, s)
	mtime := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chmod(m, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(m, 1000, 1001); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(m, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setxattr(m, "user.k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{m, mount(t, s)} {
		var st syscall.Stat_t
		if err := syscall.Stat(root, &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode != syscall.S_IFDIR|syscall.S_ISVTX|0o777 || st.Uid != 1000 || st.Gid != 1001 || st.Mtim.Sec != mtime.Unix() {
			t.Fatalf("%s: mode %o, owner %d:%d, mtime %d; want %o, 1000:1001, %d", root, st.Mode, st.Uid, st.Gid,
				st.Mtim.Sec, syscall.S_IFDIR|syscall.S_ISVTX|0o777, mtime.Unix())
		}
		v := make([]byte, 8)
		if n, err := syscall.Getxattr(root, "user.k", v); err != nil || string(v[:n]) != "v" {
			t.Fatalf("%s: user.k %q %v", root, v[:max(n, 0)], err)
		}
	}
	if err := syscall.Removexattr(m, "user.k"); err != nil {
		t.Fatal(err)
	}
}
