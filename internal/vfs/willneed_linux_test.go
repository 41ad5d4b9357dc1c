package vfs

import (
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestWillNeedReadsAhead: WillNeed brings a range of a file whose pages
// were dropped back into the page cache without a read, and is a no-op on
// files that cannot (the in-memory file system).
func TestWillNeedReadsAhead(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(name, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := OS().OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.(osFile).Fd())
	if err := f.Sync(); err != nil { // clean pages can be dropped
		t.Fatal(err)
	}
	if err := unix.Fadvise(fd, 0, 1<<20, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(fd, 0, 1<<20, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	resident := func() int {
		vec := make([]byte, (1<<20)/os.Getpagesize())
		if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
			t.Fatal(e)
		}
		n := 0
		for _, v := range vec {
			n += int(v & 1)
		}
		return n
	}
	if resident() == len(m)/os.Getpagesize() {
		t.Skip("the kernel kept the pages after DONTNEED; nothing to observe")
	}
	WillNeed(f, 0, 1<<20)
	deadline := time.Now().Add(10 * time.Second)
	for resident() < len(m)/os.Getpagesize() {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d pages resident 10 s after WillNeed", resident(), len(m)/os.Getpagesize())
		}
		time.Sleep(time.Millisecond) // polling the condition, not waiting for time
	}
	mem := NewMem()
	mf, err := mem.OpenFile("g", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	WillNeed(mf, 0, 1) // no WillNeeder: nothing happens
}
