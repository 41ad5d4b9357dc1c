package fuse

import (
	"context"
	"sync"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/kelpfs/kelp/internal/fsview"
)

// Advisory locks: the kernel forwards flock(2) and fcntl(2) record locks
// (EnableLocks) and they go to the filer's lock table through the view, so
// that they hold across every mount of the filer. The kernel releases a
// process's record locks at close(2) (FLUSH with its lock owner), and an
// open file's flock lock at its last close with the
// RELEASE request (FUSE_RELEASE_FLOCK_UNLOCK); see lockRawFS for both.

var (
	_ gofs.NodeGetlker  = (*node)(nil)
	_ gofs.NodeSetlker  = (*node)(nil)
	_ gofs.NodeSetlkwer = (*node)(nil)
)

func viewLock(owner uint64, lk *gofuse.FileLock, flags uint32) fsview.Lock {
	return fsview.Lock{Owner: owner, Flock: flags&gofuse.FUSE_LK_FLOCK != 0, Type: lk.Typ,
		Start: lk.Start, End: min(lk.End, fsview.LockEOF), Pid: lk.Pid}
}

func (n *node) Getlk(ctx context.Context, f gofs.FileHandle, owner uint64, lk *gofuse.FileLock, flags uint32, out *gofuse.FileLock) syscall.Errno {
	ctx, done := uninterrupted(ctx)
	defer done()
	l, err := n.v.GetLock(ctx, n.self(), viewLock(owner, lk, flags))
	if err != nil {
		return n.v.Errno(err)
	}
	out.Typ, out.Start, out.End, out.Pid = l.Type, l.Start, l.End, l.Pid
	if l.Type == fsview.LockUnlock {
		*out = *lk
		out.Typ = syscall.F_UNLCK
	}
	return 0
}

func (n *node) Setlk(ctx context.Context, f gofs.FileHandle, owner uint64, lk *gofuse.FileLock, flags uint32) syscall.Errno {
	return n.setlk(ctx, f, owner, lk, flags, false)
}

func (n *node) Setlkw(ctx context.Context, f gofs.FileHandle, owner uint64, lk *gofuse.FileLock, flags uint32) syscall.Errno {
	return n.setlk(ctx, f, owner, lk, flags, true)
}

func (n *node) setlk(ctx context.Context, f gofs.FileHandle, owner uint64, lk *gofuse.FileLock, flags uint32, wait bool) syscall.Errno {
	l := viewLock(owner, lk, flags)
	switch {
	case l.Type == fsview.LockUnlock:
		// Unlocks come at close(2), also after the caller was interrupted:
		// they must reach the filer.
		ctx = context.WithoutCancel(ctx)
	case !wait:
		// Only a wait for a lock honours an interrupt (interrupt.go).
		var done context.CancelFunc
		ctx, done = uninterrupted(ctx)
		defer done()
	}
	err := n.v.SetLock(ctx, n.self(), l, wait)
	if err == syscall.EAGAIN && l.Flock {
		return syscall.EWOULDBLOCK
	}
	return n.v.Errno(err)
}

// lockRawFS passes the kernel's requests to go-fuse's node bridge and
// adds what the bridge does not pass on. The kernel keeps no record of the
// locks of a file system that implements them, so it does not send an
// unlock at close: FLUSH carries the closing process's lock owner, whose
// record locks on the file must go (POSIX: any close of the file releases
// them), and the last RELEASE of an open file that took a flock lock has
// FUSE_RELEASE_FLOCK_UNLOCK. Both become unlock requests through the bridge.
type lockRawFS struct {
	gofuse.RawFileSystem
	mu     sync.Mutex
	owners map[uint64]map[uint64]bool // node id -> lock owners that took a record lock on it
}

// releaseFlockUnlock is FUSE_RELEASE_FLOCK_UNLOCK of fuse_release_in.
const releaseFlockUnlock = 1 << 1

func newLockRawFS(fs gofuse.RawFileSystem) *lockRawFS {
	return &lockRawFS{RawFileSystem: fs, owners: map[uint64]map[uint64]bool{}}
}

func (w *lockRawFS) note(in *gofuse.LkIn) {
	if in.LkFlags&gofuse.FUSE_LK_FLOCK != 0 || in.Lk.Typ == syscall.F_UNLCK {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.owners[in.NodeId] == nil {
		w.owners[in.NodeId] = map[uint64]bool{}
	}
	w.owners[in.NodeId][in.Owner] = true
}

func (w *lockRawFS) SetLk(cancel <-chan struct{}, in *gofuse.LkIn) gofuse.Status {
	st := w.RawFileSystem.SetLk(cancel, in)
	if st == gofuse.OK {
		w.note(in)
	}
	return st
}

func (w *lockRawFS) SetLkw(cancel <-chan struct{}, in *gofuse.LkIn) gofuse.Status {
	st := w.RawFileSystem.SetLkw(cancel, in)
	if st == gofuse.OK {
		w.note(in)
	}
	return st
}

func (w *lockRawFS) Flush(cancel <-chan struct{}, in *gofuse.FlushIn) gofuse.Status {
	st := w.RawFileSystem.Flush(cancel, in)
	w.mu.Lock()
	held := w.owners[in.NodeId][in.LockOwner]
	if held {
		delete(w.owners[in.NodeId], in.LockOwner)
		if len(w.owners[in.NodeId]) == 0 {
			delete(w.owners, in.NodeId)
		}
	}
	w.mu.Unlock()
	if held {
		w.RawFileSystem.SetLk(nil, &gofuse.LkIn{InHeader: in.InHeader, Fh: in.Fh, Owner: in.LockOwner,
			Lk: gofuse.FileLock{Start: 0, End: fsview.LockEOF, Typ: syscall.F_UNLCK}})
	}
	return st
}

func (w *lockRawFS) Release(cancel <-chan struct{}, in *gofuse.ReleaseIn) {
	if in.ReleaseFlags&releaseFlockUnlock != 0 {
		w.RawFileSystem.SetLk(nil, &gofuse.LkIn{InHeader: in.InHeader, Fh: in.Fh, Owner: in.LockOwner,
			Lk: gofuse.FileLock{Start: 0, End: fsview.LockEOF, Typ: syscall.F_UNLCK}, LkFlags: gofuse.FUSE_LK_FLOCK})
	}
	w.RawFileSystem.Release(cancel, in)
}
