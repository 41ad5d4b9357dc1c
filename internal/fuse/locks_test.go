package fuse

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/testutil"
)

// openBoth creates name through mount a and opens it through both mounts.
func openBoth(t *testing.T, a, b, name string) (*os.File, *os.File) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(a, name), make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(b, name))
		return err == nil
	}, "the second mount does not see %s", name)
	fa, err := os.OpenFile(filepath.Join(a, name), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := os.OpenFile(filepath.Join(b, name), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fa.Close(); fb.Close() })
	return fa, fb
}

func TestFlockAcrossMounts(t *testing.T) {
	needFUSE(t)
	s := startFiler(t)
	m1, m2 := mount(t, s), mount(t, s)
	fa, fb := openBoth(t, m1, m2, "flocked")
	if err := syscall.Flock(int(fa.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("flock EX on the first mount: %v", err)
	}
	wantErrno(t, syscall.Flock(int(fb.Fd()), syscall.LOCK_EX|syscall.LOCK_NB), syscall.EWOULDBLOCK)
	wantErrno(t, syscall.Flock(int(fb.Fd()), syscall.LOCK_SH|syscall.LOCK_NB), syscall.EWOULDBLOCK)
	// Downgrade to shared: a second shared lock is allowed, an exclusive not.
	if err := syscall.Flock(int(fa.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		t.Fatalf("flock SH (downgrade): %v", err)
	}
	if err := syscall.Flock(int(fb.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		t.Fatalf("a second shared flock: %v", err)
	}
	if err := syscall.Flock(int(fb.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	// A blocking flock waits until the holder closes its file.
	got := make(chan error, 1)
	fdb := int(fb.Fd())
	go func() { got <- syscall.Flock(fdb, syscall.LOCK_EX) }()
	select {
	case err := <-got:
		t.Fatalf("a blocking flock returned %v while the other mount holds the lock", err)
	case <-time.After(200 * time.Millisecond): // still waiting, as it must (a negative check)
	}
	fa.Close() // releases its flock
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("blocking flock after the release: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a blocking flock still waits after the holder closed its file")
	}
	// The first mount now sees the second's lock.
	fa2, err := os.Open(filepath.Join(m1, "flocked"))
	if err != nil {
		t.Fatal(err)
	}
	defer fa2.Close()
	wantErrno(t, syscall.Flock(int(fa2.Fd()), syscall.LOCK_SH|syscall.LOCK_NB), syscall.EWOULDBLOCK)
}

func setlk(f *os.File, cmd int, typ int16, start, n int64) error {
	return syscall.FcntlFlock(f.Fd(), cmd, &syscall.Flock_t{Type: typ, Whence: 0, Start: start, Len: n})
}

func TestFcntlLocksAcrossMounts(t *testing.T) {
	needFUSE(t)
	s := startFiler(t)
	m1, m2 := mount(t, s), mount(t, s)
	fa, fb := openBoth(t, m1, m2, "ranges")
	if err := setlk(fa, syscall.F_SETLK, syscall.F_WRLCK, 0, 100); err != nil {
		t.Fatalf("write lock [0,100) on the first mount: %v", err)
	}
	wantErrno(t, setlk(fb, syscall.F_SETLK, syscall.F_WRLCK, 50, 100), syscall.EAGAIN)
	wantErrno(t, setlk(fb, syscall.F_SETLK, syscall.F_RDLCK, 99, 1), syscall.EAGAIN)
	if err := setlk(fb, syscall.F_SETLK, syscall.F_WRLCK, 100, 100); err != nil {
		t.Fatalf("write lock [100,200) beside it: %v", err)
	}
	// F_GETLK from the second mount reports the first's lock.
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Start: 10, Len: 5}
	if err := syscall.FcntlFlock(fb.Fd(), syscall.F_GETLK, &lk); err != nil {
		t.Fatal(err)
	}
	if lk.Type != syscall.F_WRLCK || lk.Start != 0 || lk.Len != 100 {
		t.Fatalf("F_GETLK = type %d start %d len %d, want the write lock [0,100)", lk.Type, lk.Start, lk.Len)
	}
	lk = syscall.Flock_t{Type: syscall.F_WRLCK, Start: 500, Len: 5}
	if err := syscall.FcntlFlock(fb.Fd(), syscall.F_GETLK, &lk); err != nil {
		t.Fatal(err)
	}
	if lk.Type != syscall.F_UNLCK {
		t.Fatalf("F_GETLK of a free range = type %d, want F_UNLCK", lk.Type)
	}
	// Read locks share; a write lock over them does not.
	if err := setlk(fa, syscall.F_SETLK, syscall.F_RDLCK, 300, 100); err != nil {
		t.Fatal(err)
	}
	if err := setlk(fb, syscall.F_SETLK, syscall.F_RDLCK, 350, 100); err != nil {
		t.Fatalf("a second read lock over a read lock: %v", err)
	}
	wantErrno(t, setlk(fb, syscall.F_SETLK, syscall.F_WRLCK, 390, 1), syscall.EAGAIN)
	// Unlocking part of a range frees just that part.
	if err := setlk(fa, syscall.F_SETLK, syscall.F_UNLCK, 0, 50); err != nil {
		t.Fatal(err)
	}
	if err := setlk(fb, syscall.F_SETLK, syscall.F_WRLCK, 0, 50); err != nil {
		t.Fatalf("lock the range the other mount unlocked: %v", err)
	}
	wantErrno(t, setlk(fb, syscall.F_SETLK, syscall.F_WRLCK, 50, 1), syscall.EAGAIN)
	// F_SETLKW waits; closing the holder's descriptor releases its locks.
	got := make(chan error, 1)
	fdb := fb.Fd()
	go func() {
		got <- syscall.FcntlFlock(fdb, syscall.F_SETLKW, &syscall.Flock_t{Type: syscall.F_WRLCK, Start: 60, Len: 10})
	}()
	select {
	case err := <-got:
		t.Fatalf("F_SETLKW returned %v while the other mount holds the range", err)
	case <-time.After(200 * time.Millisecond): // still waiting, as it must (a negative check)
	}
	fa.Close()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("F_SETLKW after the holder closed: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("F_SETLKW still waits after the holder closed its descriptor")
	}
	if err := setlk(fb, syscall.F_SETLK, syscall.F_WRLCK, 0, 1000); err != nil {
		t.Fatalf("the whole file after the close: %v", err)
	}
}

func TestStatfsAndAtime(t *testing.T) {
	needFUSE(t)
	s := startFiler(t)
	m := mount(t, s)
	var st syscall.Statfs_t
	if err := syscall.Statfs(m, &st); err != nil {
		t.Fatal(err)
	}
	total := st.Blocks * uint64(st.Bsize)
	if total == 0 || total == 1<<50 || st.Bfree > st.Blocks || st.Bavail > st.Blocks {
		t.Fatalf("statfs: blocks %d bfree %d bavail %d of %d bytes: not the cluster's capacity", st.Blocks, st.Bfree, st.Bavail, st.Bsize)
	}
	p := filepath.Join(m, "timed")
	if err := os.WriteFile(p, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	atime := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	mtime := time.Date(2011, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := os.Chtimes(p, atime, mtime); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(p); err != nil {
		t.Fatal(err)
	}
	// Closed files commit in the background: fsync of the directory waits
	// for that (docs/mount.md), then a fresh mount reads the times from the
	// filer, not the kernel's cache.
	d, err := os.Open(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatalf("fsync of the directory: %v", err)
	}
	d.Close()
	var sb syscall.Stat_t
	if err := syscall.Stat(filepath.Join(mount(t, s), "timed"), &sb); err != nil {
		t.Fatal(err)
	}
	if got := time.Unix(sb.Atim.Unix()); !got.Equal(atime) {
		t.Fatalf("atime %v, want %v (set by utimens, kept across a read)", got, atime)
	}
	if got := time.Unix(sb.Mtim.Unix()); !got.Equal(mtime) {
		t.Fatalf("mtime %v, want %v", got, mtime)
	}
}
