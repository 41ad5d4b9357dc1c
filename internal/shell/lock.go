package shell

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/pb/masterpb"
)

// adminLock is this shell's hold on the cluster-wide admin lock.
type adminLock struct {
	mu      sync.Mutex
	token   uint64 // 0: not held
	expires time.Time
	lost    error         // set by the renewal when the lease is gone
	stop    chan struct{} // closes to stop the renewal
	done    chan struct{} // closed when the renewal has stopped
}

func lockCommands() []command {
	return []command{
		{name: "lock", summary: "take the cluster-wide admin lock (leased from the master, renewed while held)",
			setup: func(fs *flag.FlagSet) runFunc {
				return func(ctx context.Context, s *Shell, args []string) error {
					if err := noArgs(args); err != nil {
						return err
					}
					return s.acquireLock(ctx)
				}
			}},
		{name: "unlock", summary: "release the admin lock",
			setup: func(fs *flag.FlagSet) runFunc {
				return func(ctx context.Context, s *Shell, args []string) error {
					if err := noArgs(args); err != nil {
						return err
					}
					if !s.releaseLock(ctx) {
						fmt.Fprintln(s.out, "the admin lock was not held")
						return nil
					}
					fmt.Fprintln(s.out, "admin lock released")
					return nil
				}
			}},
	}
}

func (s *Shell) acquireLock(ctx context.Context) error {
	l := s.lock
	l.mu.Lock()
	held := l.token != 0 && l.lost == nil
	l.mu.Unlock()
	if held {
		fmt.Fprintln(s.out, "admin lock already held")
		return nil
	}
	s.stopRenewal()
	var resp *masterpb.LeaseAdminLockResponse
	err := s.conns.master(ctx, func(m masterpb.MasterClient) (err error) {
		resp, err = m.LeaseAdminLock(ctx, &masterpb.LeaseAdminLockRequest{Owner: s.cfg.Owner, LeaseMs: s.cfg.LockLease.Milliseconds()})
		return err
	})
	if err != nil {
		return fmt.Errorf("shell: take admin lock: %w", err)
	}
	if resp.GetToken() == 0 {
		return fmt.Errorf("shell: take admin lock: master answered no token")
	}
	expires := time.UnixMilli(resp.GetExpiresUnixMs())
	l.mu.Lock()
	l.token, l.expires, l.lost = resp.GetToken(), expires, nil
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	stop, done := l.stop, l.done
	l.mu.Unlock()
	go s.renewLock(stop, done)
	fmt.Fprintf(s.out, "admin lock acquired by %q\n", s.cfg.Owner)
	return nil
}

// renewInterval is a third of the time left on the lease, so two renewals
// may fail before it runs out.
func renewInterval(expires, now time.Time) time.Duration {
	return max(50*time.Millisecond, expires.Sub(now)/3)
}

// renewLock keeps the lease alive until stop closes. A renewal refused by
// the master (someone else holds the lock, or the token is unknown) loses
// the lock at once; unreachable masters lose it when the lease runs out.
func (s *Shell) renewLock(stop, done chan struct{}) {
	defer close(done)
	l := s.lock
	for {
		l.mu.Lock()
		token, expires := l.token, l.expires
		l.mu.Unlock()
		timer := time.NewTimer(renewInterval(expires, time.Now()))
		select {
		case <-stop:
			timer.Stop()
			return
		case <-timer.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(time.Second, time.Until(expires)))
		var resp *masterpb.LeaseAdminLockResponse
		err := s.conns.master(ctx, func(m masterpb.MasterClient) (err error) {
			resp, err = m.LeaseAdminLock(ctx, &masterpb.LeaseAdminLockRequest{
				Owner: s.cfg.Owner, PreviousToken: token, LeaseMs: s.cfg.LockLease.Milliseconds(),
			})
			return err
		})
		cancel()
		l.mu.Lock()
		switch {
		case err == nil && resp.GetToken() != 0:
			l.token, l.expires = resp.GetToken(), time.UnixMilli(resp.GetExpiresUnixMs())
		case err != nil && refused(err), !time.Now().Before(expires):
			if err == nil {
				err = errors.New("master answered no token")
			}
			lost := fmt.Errorf("%w: renewal failed: %w", ErrLockLost, err)
			l.lost = lost
			l.mu.Unlock()
			s.log.Warn("admin lock lost", "err", err)
			fmt.Fprintf(s.err, "warning: %v\n", lost)
			return
		default:
			s.log.Warn("admin lock renewal failed; retrying", "err", err)
		}
		l.mu.Unlock()
	}
}

// refused tells a definite "no" from the master apart from a failure to reach it.
func refused(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Unknown:
		return false
	}
	return true
}

// stopRenewal stops the renewal goroutine, if any, and waits for it.
func (s *Shell) stopRenewal() {
	l := s.lock
	l.mu.Lock()
	stop, done := l.stop, l.done
	l.stop, l.done = nil, nil
	l.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// releaseLock stops the renewal and gives the lock back; it reports whether
// the lock was held.
func (s *Shell) releaseLock(ctx context.Context) bool {
	s.stopRenewal()
	l := s.lock
	l.mu.Lock()
	token, lost := l.token, l.lost
	l.token, l.lost = 0, nil
	l.mu.Unlock()
	if token == 0 {
		return false
	}
	if lost == nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		err := s.conns.master(ctx, func(m masterpb.MasterClient) error {
			_, err := m.ReleaseAdminLock(ctx, &masterpb.ReleaseAdminLockRequest{Owner: s.cfg.Owner, Token: token})
			return err
		})
		if err != nil {
			// The lease runs out by itself; say so rather than fail.
			fmt.Fprintf(s.err, "warning: release admin lock: %v (it expires with its lease)\n", err)
		}
	}
	return true
}

// planView is the cluster view a command plans on. Applying the plan
// (force) needs the admin lock, checked before anything is read; a dry run
// needs none.
func (s *Shell) planView(ctx context.Context, force bool) (*view, error) {
	if force {
		if err := s.requireLock(); err != nil {
			return nil, err
		}
	}
	return s.fetchView(ctx)
}

// requireLock is called by every command before it changes the cluster, and
// between the steps of long ones.
func (s *Shell) requireLock() error {
	l := s.lock
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != nil {
		return l.lost
	}
	if l.token == 0 {
		return ErrNotLocked
	}
	return nil
}

// lockToken is the token to send with mutating master calls.
func (s *Shell) lockToken() uint64 {
	s.lock.mu.Lock()
	defer s.lock.mu.Unlock()
	return s.lock.token
}
