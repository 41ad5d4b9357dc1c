package fsview

import (
	"context"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// Advisory locks (flock and fcntl record locks) live in the filer's lock
// table (filerpb PosixLock), so that two mounts of one filer see each
// other's locks. A view is one lock session: its locks go when it closes,
// or when it stops renewing its lease (a crashed mount) after the filer's
// lease time (30 s). A lock is on the file's content path, so all names of
// a hard-linked file share it; renaming a locked file moves no lock.

// Lock types.
const (
	LockRead   = 0
	LockWrite  = 1
	LockUnlock = 2
)

// LockEOF is Lock.End for "to the end of the file, however far".
const LockEOF = 1<<63 - 1 // the kernel's OFFSET_MAX

// Lock is one advisory lock or lock request.
type Lock struct {
	Owner      uint64 // the kernel's lock owner (per process for fcntl, per open file for flock)
	Flock      bool
	Type       uint32 // LockRead, LockWrite, LockUnlock
	Start, End uint64 // inclusive
	Pid        uint32
}

type lockSession struct {
	once sync.Once
	id   string
	stop chan struct{}
	done chan struct{}
}

// session starts the view's lock session at its first lock: a lease kept
// alive every 10 s until Close.
func (fs *FS) session() string {
	s := &fs.locks
	s.once.Do(func() {
		s.id = newID()
		s.stop, s.done = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(s.done)
			t := time.NewTicker(10 * time.Second)
			defer t.Stop()
			for {
				select {
				case <-s.stop:
					return
				case <-t.C:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				if _, err := fs.filer.PosixLock(ctx, &filerpb.PosixLockRequest{Op: filerpb.PosixLockRequest_KEEPALIVE, Session: s.id}); err != nil {
					fs.log.Warn("fsview: lock lease renewal failed", "err", err)
				}
				cancel()
			}
		}()
	})
	return s.id
}

// endLocks releases the session's locks (Close).
func (fs *FS) endLocks() {
	s := &fs.locks
	started := false
	s.once.Do(func() {}) // no session after this
	if s.stop != nil {
		started = true
		close(s.stop)
		<-s.done
	}
	if started {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		fs.filer.PosixLock(ctx, &filerpb.PosixLockRequest{Op: filerpb.PosixLockRequest_END_SESSION, Session: s.id})
	}
}

// lockPath is the filer path locks of p are kept under.
func (fs *FS) lockPath(ctx context.Context, p string) string {
	if n, err := fs.resolve(ctx, p); err == nil {
		return n.contentPath()
	}
	return fs.full(p)
}

func (fs *FS) lockReq(ctx context.Context, op filerpb.PosixLockRequest_Op, p string, l Lock) (*filerpb.PosixLockResponse, error) {
	if l.Start > l.End || l.Type > LockUnlock {
		return nil, syscall.EINVAL
	}
	return fs.filer.PosixLock(ctx, &filerpb.PosixLockRequest{Op: op, Session: fs.session(), Path: fs.lockPath(ctx, p),
		Owner: l.Owner, Flock: l.Flock, Type: l.Type, Start: l.Start, End: l.End, Pid: l.Pid})
}

// GetLock answers F_GETLK: a lock of another owner that conflicts with l,
// or l with Type LockUnlock when there is none.
func (fs *FS) GetLock(ctx context.Context, p string, l Lock) (Lock, error) {
	r, err := fs.lockReq(ctx, filerpb.PosixLockRequest_TEST, p, l)
	if err != nil {
		return Lock{}, err
	}
	if !r.Conflict {
		l.Type = LockUnlock
		return l, nil
	}
	return Lock{Type: r.Type, Start: r.Start, End: r.End, Pid: r.Pid, Flock: l.Flock}, nil
}

// SetLock takes or releases l; with wait it waits while another owner holds
// a conflicting lock (until ctx ends: EINTR; EDEADLK when the holder, or
// an owner it waits for, waits for l's owner), without it that is EAGAIN.
func (fs *FS) SetLock(ctx context.Context, p string, l Lock, wait bool) error {
	op := filerpb.PosixLockRequest_SET
	if wait {
		op = filerpb.PosixLockRequest_SET_WAIT
	}
	r, err := fs.lockReq(ctx, op, p, l)
	if err != nil {
		if ctx.Err() != nil {
			return syscall.EINTR
		}
		if status.Code(err) == codes.Aborted { // the filer found the wait would deadlock
			return syscall.EDEADLK
		}
		return err
	}
	if r.Conflict {
		return syscall.EAGAIN
	}
	return nil
}
