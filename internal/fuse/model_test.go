package fuse

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestMountMatchesALocalDirectory runs one seeded random sequence of file
// system calls on the mount and on a local directory: every call must give
// the same result and errno, and the trees the same content in the end.
// KELP_FUSE_MODEL_OPS sets the length (default 1500) and KELP_FUSE_MODEL_SEED
// the seed (default 1) for longer or other runs.
func TestMountMatchesALocalDirectory(t *testing.T) {
	needFUSE(t)
	runModel(t, 1500)
}

// As TestMountMatchesALocalDirectory, with the thread making the calls
// sent signals all along (SIGURG, as the Go runtime's preemption does under
// load): the kernel then interrupts the requests on their way (FUSE
// INTERRUPT), and each call must still give what it gives undisturbed.
func TestMountMatchesALocalDirectoryWhenInterrupted(t *testing.T) {
	needFUSE(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pid, tid := syscall.Getpid(), syscall.Gettid()
	stop := make(chan struct{})
	var sent atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			syscall.Tgkill(pid, tid, syscall.SIGURG)
			sent.Add(1)
			time.Sleep(20 * time.Microsecond) // a signal rate, not a wait
		}
	}()
	defer func() { close(stop); <-done; t.Logf("%d signals sent", sent.Load()) }()
	runModel(t, 600)
}

// runModel runs the model sequence of ops calls (see
// TestMountMatchesALocalDirectory) on a new mount and a local directory.
func runModel(t *testing.T, ops int) {
	t.Helper()
	mnt := mount(t, startFiler(t))
	local := t.TempDir()
	if v := os.Getenv("KELP_FUSE_MODEL_OPS"); v != "" {
		fmt.Sscan(v, &ops)
	}
	seed := int64(1)
	if v := os.Getenv("KELP_FUSE_MODEL_SEED"); v != "" {
		fmt.Sscan(v, &seed)
	}
	rng := rand.New(rand.NewSource(seed))
	names := []string{"f0", "f1", "f2", "d0", "d1", "d0/f0", "d0/f1", "d1/f0", "d0/d2", "d0/d2/f0"}
	pick := func() string { return names[rng.Intn(len(names))] }
	type fdPair struct{ m, l int }
	var fds []fdPair
	// Runs before the unmount (cleanups run last first): a mount with open
	// descriptors would only detach lazily, and the server wait for them.
	t.Cleanup(func() {
		for _, fd := range fds {
			syscall.Close(fd.m)
			syscall.Close(fd.l)
		}
	})
	errOf := func(err error) syscall.Errno {
		var en syscall.Errno
		if errors.As(err, &en) {
			return en
		}
		if err != nil {
			return syscall.EIO
		}
		return 0
	}
	// On a failure, the last operations and what each side has at the
	// names say how the trees got apart.
	var hist []string
	both := func(i int, what string, f func(root string) error) {
		t.Helper()
		em, el := errOf(f(mnt)), errOf(f(local))
		hist[len(hist)-1] += fmt.Sprintf(" %s: %v", what, el)
		if em != el {
			t.Fatalf("op %d %s: mount %v, local %v (seed %d)", i, what, em, el, seed)
		}
	}
	buf := make([]byte, 64<<10)
	defer func() {
		if !t.Failed() {
			return
		}
		t.Logf("last operations:\n%s", strings.Join(hist[max(0, len(hist)-40):], "\n"))
		for _, n := range names {
			var sm, sl syscall.Stat_t
			em, el := syscall.Lstat(filepath.Join(mnt, n), &sm), syscall.Lstat(filepath.Join(local, n), &sl)
			t.Logf("%s: mount mode %o %v, local mode %o %v", n, sm.Mode, errOf(em), sl.Mode, errOf(el))
		}
	}()
	for i := 0; i < ops; i++ {
		a, b := pick(), pick()
		op := rng.Intn(14)
		hist = append(hist, fmt.Sprintf("op %d: %d %s %s (open fds %d)", i, op, a, b, len(fds)))
		switch op {
		case 0, 1: // open
			flags := []int{os.O_RDWR | os.O_CREATE, os.O_RDWR, os.O_RDONLY, os.O_RDWR | os.O_CREATE | os.O_EXCL,
				os.O_RDWR | os.O_TRUNC, os.O_WRONLY | os.O_APPEND | os.O_CREATE,
				os.O_WRONLY | os.O_CREATE, os.O_WRONLY | os.O_TRUNC}[rng.Intn(8)]
			if len(fds) >= 4 {
				continue
			}
			fm, em := syscall.Open(filepath.Join(mnt, a), flags|syscall.O_CLOEXEC, 0o644)
			fl, el := syscall.Open(filepath.Join(local, a), flags|syscall.O_CLOEXEC, 0o644)
			if errOf(em) != errOf(el) {
				t.Fatalf("op %d open %s %#x: mount %v, local %v", i, a, flags, em, el)
			}
			if em == nil {
				fds = append(fds, fdPair{fm, fl})
			}
		case 2, 3: // write
			if len(fds) == 0 {
				continue
			}
			fd := fds[rng.Intn(len(fds))]
			n := 1 + rng.Intn(20_000)
			if rng.Intn(16) == 0 {
				// Past maxPending chunks of the test filer's 64 KiB: the
				// write commits the chunks uploaded in its middle.
				n = 700_000
			}
			data := make([]byte, n)
			rng.Read(data)
			off := rng.Int63n(200_000)
			nm, em := syscall.Pwrite(fd.m, data, off)
			nl, el := syscall.Pwrite(fd.l, data, off)
			if errOf(em) != errOf(el) || nm != nl {
				t.Fatalf("op %d pwrite: mount %d %v, local %d %v", i, nm, em, nl, el)
			}
		case 4: // read
			if len(fds) == 0 {
				continue
			}
			fd := fds[rng.Intn(len(fds))]
			off := rng.Int63n(220_000)
			bm := make([]byte, 1+rng.Intn(len(buf)))
			bl := make([]byte, len(bm))
			nm, em := syscall.Pread(fd.m, bm, off)
			nl, el := syscall.Pread(fd.l, bl, off)
			if errOf(em) != errOf(el) || nm != nl || !bytes.Equal(bm[:max(nm, 0)], bl[:max(nl, 0)]) {
				t.Fatalf("op %d pread at %d: mount %d %v, local %d %v (or bytes differ)", i, off, nm, em, nl, el)
			}
		case 5: // close
			if len(fds) == 0 {
				continue
			}
			k := rng.Intn(len(fds))
			em, el := syscall.Close(fds[k].m), syscall.Close(fds[k].l)
			if errOf(em) != errOf(el) {
				t.Fatalf("op %d close: mount %v, local %v", i, em, el)
			}
			fds = append(fds[:k], fds[k+1:]...)
		case 6:
			size := rng.Int63n(150_000)
			both(i, "truncate "+a, func(r string) error { return syscall.Truncate(filepath.Join(r, a), size) })
		case 7:
			both(i, "rename "+a+" "+b, func(r string) error { return syscall.Rename(filepath.Join(r, a), filepath.Join(r, b)) })
		case 8:
			both(i, "link "+a+" "+b, func(r string) error { return syscall.Link(filepath.Join(r, a), filepath.Join(r, b)) })
		case 9:
			both(i, "unlink "+a, func(r string) error { return syscall.Unlink(filepath.Join(r, a)) })
		case 10:
			both(i, "mkdir "+a, func(r string) error { return syscall.Mkdir(filepath.Join(r, a), 0o755) })
		case 11:
			both(i, "rmdir "+a, func(r string) error { return syscall.Rmdir(filepath.Join(r, a)) })
		case 12:
			mode := uint32(0o600 + rng.Intn(0o177))
			both(i, "chmod "+a, func(r string) error { return syscall.Chmod(filepath.Join(r, a), mode) })
		case 13:
			if len(fds) > 0 {
				fd := fds[rng.Intn(len(fds))]
				em, el := syscall.Fsync(fd.m), syscall.Fsync(fd.l)
				if errOf(em) != errOf(el) {
					t.Fatalf("op %d fsync: mount %v, local %v", i, em, el)
				}
				continue
			}
			v := []byte{byte(rng.Intn(256))}
			both(i, "setxattr "+a, func(r string) error { return syscall.Setxattr(filepath.Join(r, a), "user.k", v, 0) })
		}
	}
	for _, fd := range fds {
		syscall.Close(fd.m)
		syscall.Close(fd.l)
	}
	fds = nil
	if got, want := snapshot(t, mnt), snapshot(t, local); got != want {
		t.Fatalf("trees differ after %d ops:\nmount:\n%s\nlocal:\n%s", ops, got, want)
	}
}

// snapshot describes a tree: each path with its type, mode, link count and
// content digest.
func snapshot(t *testing.T, root string) string {
	var lines []string
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		st := fi.Sys().(*syscall.Stat_t)
		line := fmt.Sprintf("%s %v nlink=%d", rel, fi.Mode(), st.Nlink)
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			line += fmt.Sprintf(" size=%d sum=%x", len(b), fnv(b))
		}
		if fi.IsDir() {
			line = fmt.Sprintf("%s %v", rel, fi.Mode())
		}
		lines = append(lines, line)
		return nil
	})
	sort.Strings(lines)
	out := ""
	for _, l := range lines {
		out += l + "\n"
	}
	return out
}

func fnv(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}
