package vfs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// conformance checks the behaviour every FS must share.
func conformance(t *testing.T, fsys FS, dir string) {
	t.Helper()
	sub := filepath.Join(dir, "a", "b")
	if err := fsys.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(sub, "f")
	if _, err := Open(fsys, name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open missing: %v", err)
	}
	f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("hello ")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("world"), 6); err != nil {
		t.Fatal(err)
	}
	if sz, _ := f.Size(); sz != 11 {
		t.Fatalf("size %d", sz)
	}
	buf := make([]byte, 5)
	if n, err := f.ReadAt(buf, 6); err != nil || n != 5 || string(buf) != "world" {
		t.Fatalf("ReadAt = %d %v %q", n, err, buf)
	}
	if n, err := f.ReadAt(buf, 8); n != 3 || err == nil {
		t.Fatalf("short ReadAt = %d %v, want 3 and EOF", n, err)
	}
	if err := f.Truncate(5); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("O_EXCL on existing: %v", err)
	}
	if err := fsys.Rename(name, name+"2"); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir(sub); err != nil {
		t.Fatal(err)
	}
	data, err := ReadFile(fsys, name+"2")
	if err != nil || string(data) != "hello" {
		t.Fatalf("ReadFile = %q %v", data, err)
	}
	if st, err := fsys.Stat(name + "2"); err != nil || st.Size() != 5 || st.IsDir() {
		t.Fatalf("Stat = %v %v", st, err)
	}
	if err := WriteFileAtomic(fsys, name, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	names, err := fsys.ReadDir(sub)
	if err != nil || len(names) != 2 || names[0] != "f" || names[1] != "f2" {
		t.Fatalf("ReadDir = %v %v", names, err)
	}
	if err := fsys.Remove(name + "2"); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat(name + "2"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat removed: %v", err)
	}
}

func TestConformance(t *testing.T) {
	t.Run("os", func(t *testing.T) { conformance(t, OS(), t.TempDir()) })
	t.Run("mem", func(t *testing.T) { conformance(t, NewMem(), "/d") })
	t.Run("crash", func(t *testing.T) { conformance(t, NewCrash(1, CrashOptions{}), "/d") })
	t.Run("faulty", func(t *testing.T) { conformance(t, NewFaulty(NewMem()), "/d") })
}

func TestOSFreeBytes(t *testing.T) {
	n, err := OS().(FreeSpacer).FreeBytes(t.TempDir())
	if err != nil || n == 0 {
		t.Fatalf("FreeBytes = %d, %v", n, err)
	}
}

func writeFile(t *testing.T, fsys FS, name string, data []byte, sync bool) File {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func TestCrashKeepsSyncedAndSomeOfUnsynced(t *testing.T) {
	sawShort, sawFull := false, false
	for seed := int64(0); seed < 50; seed++ {
		m := NewCrash(seed, CrashOptions{})
		m.MkdirAll("/d", 0o755)
		f := writeFile(t, m, "/d/f", []byte("synced|"), true)
		m.SyncDir("/d")
		f.Write([]byte("unsynced-tail"))
		after := m.Crash()
		if _, err := f.Write([]byte("x")); !errors.Is(err, ErrCrashed) {
			t.Fatalf("write after crash: %v", err)
		}
		got, err := ReadFile(after, "/d/f")
		if err != nil {
			t.Fatal(err)
		}
		full := []byte("synced|unsynced-tail")
		if !bytes.HasPrefix(got, []byte("synced|")) || len(got) > len(full) {
			t.Fatalf("seed %d: survivor %q lost synced data or grew", seed, got)
		}
		for i := len("synced|"); i < len(got); i++ {
			if got[i] != full[i] && got[i] != 0 {
				t.Fatalf("seed %d: survivor %q: byte %d is neither written nor zero", seed, got, i)
			}
		}
		sawShort = sawShort || len(got) < len(full)
		sawFull = sawFull || bytes.Equal(got, full)
	}
	if !sawShort || !sawFull {
		t.Fatalf("crash model never varied: short=%v full=%v", sawShort, sawFull)
	}
}

// TestCrashLosesUnsyncedPagesInTheMiddle: pages are written back in any
// order, so a crash can keep a later unsynced page and lose an earlier one,
// but never touches what was synced.
func TestCrashLosesUnsyncedPagesInTheMiddle(t *testing.T) {
	synced := bytes.Repeat([]byte{'s'}, 3*pageSize+100)
	unsynced := bytes.Repeat([]byte{'u'}, 6*pageSize)
	sawHole := false
	for seed := int64(0); seed < 50; seed++ {
		m := NewCrash(seed, CrashOptions{Garbage: seed%2 == 0})
		m.MkdirAll("/d", 0o755)
		f := writeFile(t, m, "/d/f", synced, true)
		m.SyncDir("/d")
		f.Write(unsynced)
		got, err := ReadFile(m.Crash(), "/d/f")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(got, synced) {
			t.Fatalf("seed %d: synced data damaged", seed)
		}
		rest := got[len(synced):]
		if i := bytes.IndexByte(rest, 0); i >= 0 && bytes.IndexByte(rest[i:], 'u') >= 0 {
			sawHole = true
		}
	}
	if !sawHole {
		t.Fatal("no crash lost a page in the middle and kept a later one")
	}
	// DropUnsynced keeps exactly the synced content.
	m := NewCrash(1, CrashOptions{DropUnsynced: true})
	m.MkdirAll("/d", 0o755)
	f := writeFile(t, m, "/d/f", synced, true)
	m.SyncDir("/d")
	f.Write(unsynced)
	f.WriteAt([]byte("overwritten"), 10)
	if got, _ := ReadFile(m.Crash(), "/d/f"); !bytes.Equal(got, synced) {
		t.Fatalf("DropUnsynced kept %d bytes, want the %d synced", len(got), len(synced))
	}
}

func TestCrashLosesUnsyncedDirectoryEntries(t *testing.T) {
	m := NewCrash(1, CrashOptions{})
	m.MkdirAll("/d", 0o755)
	writeFile(t, m, "/d/old", []byte("old"), true)
	m.SyncDir("/d")
	writeFile(t, m, "/d/new", []byte("new"), true) // file synced, dir not
	m.Rename("/d/old", "/d/renamed")
	after := m.Crash()
	names, _ := after.ReadDir("/d")
	if len(names) != 1 || names[0] != "old" {
		t.Fatalf("after crash dir = %v, want [old]", names)
	}
	// Without power loss (kill -9) everything survives.
	k := NewMem()
	k.MkdirAll("/d", 0o755)
	writeFile(t, k, "/d/new", []byte("new"), false)
	if got, _ := ReadFile(k.Crash(), "/d/new"); string(got) != "new" {
		t.Fatalf("kill -9 lost data: %q", got)
	}
}

func TestCrashAfterOps(t *testing.T) {
	m := NewCrash(1, CrashOptions{})
	m.MkdirAll("/d", 0o755)
	f := writeFile(t, m, "/d/f", []byte("a"), true) // create, write, sync
	m.CrashAfter(2)
	if _, err := f.Write([]byte("b")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); !errors.Is(err, ErrCrashed) {
		t.Fatalf("second op should crash: %v", err)
	}
	if !m.Crashed() {
		t.Fatal("not crashed")
	}
	after := m.Crash()
	if _, err := after.Stat("/d/f"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("file created without dir sync survived: %v", err)
	}
}

func TestCrashGarbage(t *testing.T) {
	sawGarbage := false
	for seed := int64(0); seed < 40 && !sawGarbage; seed++ {
		m := NewCrash(seed, CrashOptions{Garbage: true})
		m.MkdirAll("/d", 0o755)
		writeFile(t, m, "/d/f", bytes.Repeat([]byte{'z'}, 100), false)
		m.SyncDir("/d")
		got, _ := ReadFile(m.Crash(), "/d/f")
		sawGarbage = bytes.Trim(got, "z") != nil && len(bytes.Trim(got, "z")) > 0
	}
	if !sawGarbage {
		t.Fatal("garbage mode never produced garbage")
	}
}

func TestFaultFS(t *testing.T) {
	f := NewFaulty(NewMem())
	f.MkdirAll("/d", 0o755)
	file := writeFile(t, f, "/d/f", []byte("ok"), true)
	f.Inject(Fault{Op: OpWrite, Path: "/d/f", Skip: 1, Times: 1, Short: true})
	if _, err := file.WriteAt([]byte("1234"), 2); err != nil {
		t.Fatalf("skipped write failed: %v", err)
	}
	n, err := file.WriteAt([]byte("5678"), 6)
	if !errors.Is(err, syscall.ENOSPC) || n != 2 {
		t.Fatalf("short write = %d, %v", n, err)
	}
	if _, err := file.WriteAt([]byte("9"), 8); err != nil {
		t.Fatalf("fault should be used up: %v", err)
	}
	f.Inject(Fault{Op: OpSync, Err: syscall.EIO})
	if err := file.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync = %v", err)
	}
	f.Clear()
	if err := file.Sync(); err != nil {
		t.Fatal(err)
	}
	if f.Count(OpWrite) != 4 || f.Count(OpSync) != 3 {
		t.Fatalf("counts write=%d sync=%d", f.Count(OpWrite), f.Count(OpSync))
	}
}

func TestSnapshotIsIndependent(t *testing.T) {
	m := NewCrash(3, CrashOptions{})
	m.MkdirAll("/d", 0o755)
	f := writeFile(t, m, "/d/f", []byte("abc"), true)
	m.SyncDir("/d")
	s := m.Snapshot()
	f.Write([]byte("def"))
	if got, _ := ReadFile(s, "/d/f"); string(got) != "abc" {
		t.Fatalf("snapshot sees later write: %q", got)
	}
	if got, _ := ReadFile(s.Crash(), "/d/f"); string(got) != "abc" {
		t.Fatalf("snapshot lost synced data: %q", got)
	}
	if m.Crashed() {
		t.Fatal("snapshot's crash crashed the original")
	}
}

func TestFaultBlock(t *testing.T) {
	f := NewFaulty(NewMem())
	f.MkdirAll("/d", 0o755)
	file := writeFile(t, f, "/d/f", []byte("x"), false)
	gate := make(chan struct{})
	f.Inject(Fault{Op: OpSync, Block: gate})
	done := make(chan error, 1)
	go func() { done <- file.Sync() }()
	for f.Count(OpSync) == 0 { // the sync has started
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("blocked sync returned %v before the gate opened", err)
	default:
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatalf("sync after the gate opened: %v", err)
	}
}

func TestFaultDelay(t *testing.T) {
	f := NewFaulty(NewMem())
	f.MkdirAll("/d", 0o755)
	file := writeFile(t, f, "/d/f", []byte("x"), false)
	f.Inject(Fault{Op: OpSync, Delay: 20 * time.Millisecond})
	start := time.Now()
	if err := file.Sync(); err != nil {
		t.Fatalf("delayed sync failed: %v", err)
	}
	if time.Since(start) < 20*time.Millisecond {
		t.Fatal("sync was not delayed")
	}
}
