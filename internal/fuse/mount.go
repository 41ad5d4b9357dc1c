package fuse

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/kelpfs/kelp/internal/fsview"
)

// Options of a mount.
type Options struct {
	Dir        string // mount point
	FsName     string // shown in /proc/mounts ("kelp:filer/path")
	AllowOther bool
	ReadOnly   bool
	// CacheTimeout is how long the kernel trusts names and attributes; a
	// change made elsewhere shows after at most this long. 0 means 1s.
	CacheTimeout time.Duration
	Debug        bool
	Logger       *slog.Logger
	// SyncClose makes close(2) commit the file before it returns (strict
	// close-to-open consistency with other mounts, at the cost of a filer
	// commit and a volume write per file on the closing thread). Without
	// it, close starts the uploads and the file is committed in the
	// background after its last release (see docs/mount.md).
	SyncClose bool
	// ReadAheadKB is the kernel's read-ahead for the mount, in KiB (the
	// bdi's read_ahead_kb); 0 means DefaultReadAheadKB, < 0 leaves the
	// kernel's (128 KiB, which makes a sequential reader's READs 128 KiB
	// each, one round trip through the mount per 128 KiB).
	ReadAheadKB int
}

// DefaultReadAheadKB is the kernel read-ahead set on a mount: with it a
// sequential read(2) of 1 MiB is one 1 MiB READ (max_read), and the kernel
// keeps several such READs in flight while the view fetches ahead.
const DefaultReadAheadKB = 4096

// Mount is a mounted view.
type Mount struct {
	srv *gofuse.Server
	dir string
	log *slog.Logger
}

// New mounts v at opts.Dir and serves it in the background.
func New(v *fsview.FS, opts Options) (*Mount, error) {
	if opts.CacheTimeout <= 0 {
		opts.CacheTimeout = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	// A name the view answers absent from the filer shows at once when
	// created elsewhere; one it knows absent from a complete listing kept
	// fresh by the metadata events is cached (node.Lookup) as long as
	// names and attributes are.
	neg := time.Duration(0)
	mo := gofuse.MountOptions{
		AllowOther:   opts.AllowOther,
		FsName:       opts.FsName,
		Name:         "kelp",
		MaxWrite:     1 << 20,
		MaxReadAhead: 1 << 20, // see also Options.ReadAheadKB
		// Releases (each one a background commit) and async reads are
		// background requests: let many be in flight.
		MaxBackground: 64,
		// The kernel checks permissions against the mode bits, as on a
		// local file system.
		// nodev: a device file on the mount (made here by root, or by
		// any client of the filer) does not open the device it names.
		Options: []string{"default_permissions", "nodev"},
		Debug:   opts.Debug,
		// flock and fcntl locks go to the filer's lock table (locks.go).
		EnableLocks: true,
	}
	if opts.ReadOnly {
		mo.Options = append(mo.Options, "ro")
	}
	root := &node{v: v, readOnly: opts.ReadOnly, syncClose: opts.SyncClose, links: &linkTable{m: map[string]*gofs.Inode{}}, negTTL: opts.CacheTimeout, attrTTL: opts.CacheTimeout}
	// gofs.Mount, with the lock additions of lockRawFS around the bridge.
	raw := newLockRawFS(gofs.NewNodeFS(root, &gofs.Options{
		MountOptions:    mo,
		EntryTimeout:    &opts.CacheTimeout,
		AttrTimeout:     &opts.CacheTimeout,
		NegativeTimeout: &neg,
		NullPermissions: true,
	}))
	srv, err := gofuse.NewServer(raw, opts.Dir, &mo)
	if err != nil {
		return nil, fmt.Errorf("fuse: mount %s: %w", opts.Dir, err)
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		return nil, fmt.Errorf("fuse: mount %s: %w", opts.Dir, err)
	}
	if opts.ReadAheadKB == 0 {
		opts.ReadAheadKB = DefaultReadAheadKB
	}
	if opts.ReadAheadKB > 0 {
		if err := setReadAhead(opts.Dir, opts.ReadAheadKB); err != nil {
			opts.Logger.Debug("fuse: kernel read-ahead not set (the kernel's default stays)", "dir", opts.Dir, "err", err)
		}
	}
	return &Mount{srv: srv, dir: opts.Dir, log: opts.Logger}, nil
}

// setReadAhead sets the read-ahead of the mount at dir through its bdi in
// sysfs. The kernel takes the smaller of its default (128 KiB) and what
// the FUSE INIT reply asks, so only sysfs can raise it; writing there needs
// root: otherwise the default stays.
func setReadAhead(dir string, kb int) error {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return err
	}
	dev := uint64(st.Dev)
	p := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(dev), unix.Minor(dev))
	return os.WriteFile(p, []byte(strconv.Itoa(kb)), 0)
}

// Wait blocks until the file system is unmounted (by Unmount or by
// fusermount -u / umount from outside).
func (m *Mount) Wait() { m.srv.Wait() }

// Unmount detaches the mount. When it is busy (a process has its working
// directory inside), it detaches lazily: the kernel finishes the unmount
// once the last user is gone, and no new user gets in.
func (m *Mount) Unmount() error {
	err := m.srv.Unmount()
	if err == nil {
		return nil
	}
	m.log.Warn("mount busy, detaching lazily", "dir", m.dir, "err", err)
	for _, prog := range []string{"fusermount3", "fusermount"} {
		if out, lerr := exec.Command(prog, "-u", "-z", m.dir).CombinedOutput(); lerr == nil {
			return nil
		} else {
			err = fmt.Errorf("%w; %s -u -z: %v: %s", err, prog, lerr, out)
		}
	}
	return err
}

// ServeUntil mounts, serves until ctx ends or the mount is taken away
// from outside, then unmounts.
func ServeUntil(ctx context.Context, v *fsview.FS, opts Options) error {
	m, err := New(v, opts)
	if err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { m.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	if err := m.Unmount(); err != nil {
		return err
	}
	<-done
	return nil
}

// Lookup turns an ENOENT that node.Lookup gave an entry timeout (a name
// the view knows absent) into the negative entry the kernel caches for
// that long; the bridge passes an ENOENT with a timeout on as a plain
// ENOENT, which the kernel does not cache.
func (w *lockRawFS) Lookup(cancel <-chan struct{}, header *gofuse.InHeader, name string, out *gofuse.EntryOut) gofuse.Status {
	st := w.RawFileSystem.Lookup(cancel, header, name, out)
	if st == gofuse.ENOENT && out.NodeId == 0 && out.EntryTimeout() > 0 {
		return gofuse.OK
	}
	return st
}
