package fuse

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/kelpfs/kelp/internal/fsview"
)

// Advisory locks: the kernel forwards flock(2) and fcntl(2) record locks
// (EnableLocks) and they go to the filer's lock table through the view, so
// that they hold across every mount of the filer. The kernel releases a
// process's record locks at close(2) and an open file's flock lock at its
// last close with an unlock request, which lands here too.

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
	l, err := n.v.GetLock(ctx, n.self(), viewLock(owner, lk, flags))
	if err != nil {
		return fsview.Errno(err)
	}
	out.Typ, out.Start, out.End, out.Pid = l.Type, l.Start, l.End, l.Pid
	if l.Type == fsview.LockUnlock {
		*out = *lk
		out.Typ = syscall.F_UNLCK
	}
	return 0
}

func (n *node) Setlk(ctx context.Context, f gofs.FileHandle, owner uint64, lk *gofuse.FileLock, flags uint32) syscall.Errno {
	return n.setlk(ctx, owner, lk, flags, false)
}

func (n *node) Setlkw(ctx context.Context, f gofs.FileHandle, owner uint64, lk *gofuse.FileLock, flags uint32) syscall.Errno {
	return n.setlk(ctx, owner, lk, flags, true)
}

func (n *node) setlk(ctx context.Context, owner uint64, lk *gofuse.FileLock, flags uint32, wait bool) syscall.Errno {
	l := viewLock(owner, lk, flags)
	if l.Type == fsview.LockUnlock {
		// Unlocks come at close(2), also after the caller was interrupted:
		// they must reach the filer.
		ctx = context.WithoutCancel(ctx)
	}
	err := n.v.SetLock(ctx, n.self(), l, wait)
	if err == syscall.EAGAIN && l.Flock {
		return syscall.EWOULDBLOCK
	}
	return fsview.Errno(err)
}
