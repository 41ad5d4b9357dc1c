package filerserver

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/pb/filerpb"
	"github.com/kelpfs/kelp/internal/topology"
)

// The lock tables live in the filer's memory: every mount and WebDAV server
// of this filer shares them, and they outlive a mount or WebDAV process
// (not a filer restart, after which clients take their locks again).

// lockLease is how long a mount's advisory locks outlive its last call:
// a mount renews every lockLease/3 (fsview), so a crashed or partitioned
// mount's locks are released within this time.
const lockLease = 30 * time.Second

// Lock types of PosixLockRequest.type.
const (
	lockRead   = 0
	lockWrite  = 1
	lockUnlock = 2
)

// plock is one held advisory lock on a byte range [start, end].
type plock struct {
	session    string
	owner      uint64
	flock      bool
	write      bool
	start, end uint64
	pid        uint32
}

func (l plock) sameHolder(o plock) bool {
	return l.session == o.session && l.owner == o.owner && l.flock == o.flock
}

func (l plock) conflicts(o plock) bool {
	return l.flock == o.flock && !l.sameHolder(o) && (l.write || o.write) && l.start <= o.end && o.start <= l.end
}

// posixLocks is the advisory lock table: POSIX record locks and flock
// locks (separate namespaces, as on Linux), by filer path.
type posixLocks struct {
	mu       sync.Mutex
	files    map[string][]plock
	sessions map[string]time.Time              // last call of each session holding or waiting
	changed  chan struct{}                     // closed and replaced whenever a lock goes
	waiting  map[lockHolder]map[lockHolder]int // blocked fcntl owners -> holders they wait on (deadlock.go)
	lease    time.Duration
}

func newPosixLocks() *posixLocks {
	return &posixLocks{files: map[string][]plock{}, sessions: map[string]time.Time{},
		changed: make(chan struct{}), lease: lockLease}
}

// broadcast wakes the waiters; callers hold mu.
func (t *posixLocks) broadcast() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// expire drops the locks of sessions whose lease ran out; callers hold mu.
func (t *posixLocks) expire(now time.Time) {
	for s, seen := range t.sessions {
		if now.Sub(seen) > t.lease {
			t.dropSession(s)
		}
	}
}

// dropSession releases everything session s holds; callers hold mu.
func (t *posixLocks) dropSession(s string) {
	delete(t.sessions, s)
	for p, ls := range t.files {
		kept := ls[:0]
		for _, l := range ls {
			if l.session != s {
				kept = append(kept, l)
			}
		}
		if len(kept) == 0 {
			delete(t.files, p)
		} else {
			t.files[p] = kept
		}
	}
	t.broadcast()
}

// conflict returns a held lock that conflicts with want.
func (t *posixLocks) conflict(path string, want plock) (plock, bool) {
	for _, l := range t.files[path] {
		if l.conflicts(want) {
			return l, true
		}
	}
	return plock{}, false
}

// put replaces want's holder's locks of want's kind in its range by want
// (or removes them for an unlock, splitting ranges that stick out).
func (t *posixLocks) put(path string, want plock, unlock bool) {
	var out []plock
	for _, l := range t.files[path] {
		if !l.sameHolder(want) || l.end < want.start || want.end < l.start {
			out = append(out, l)
			continue
		}
		if l.start < want.start {
			left := l
			left.end = want.start - 1
			out = append(out, left)
		}
		if l.end > want.end {
			right := l
			right.start = want.end + 1
			out = append(out, right)
		}
	}
	if !unlock {
		out = append(out, want)
	}
	if len(out) == 0 {
		delete(t.files, path)
	} else {
		t.files[path] = out
	}
	t.broadcast()
}

// errLockWait ends a SET_WAIT whose caller went away.
var errLockWait = errors.New("lock wait cancelled")

// do runs one request.
func (t *posixLocks) do(ctx context.Context, req *filerpb.PosixLockRequest) (*filerpb.PosixLockResponse, error) {
	if req.Session == "" {
		return nil, status.Error(codes.InvalidArgument, "posix lock: no session")
	}
	if req.Op != filerpb.PosixLockRequest_KEEPALIVE && req.Op != filerpb.PosixLockRequest_END_SESSION {
		if req.Path == "" || req.Type > lockUnlock || req.Start > req.End {
			return nil, status.Error(codes.InvalidArgument, "posix lock: bad path, type or range")
		}
	}
	want := plock{session: req.Session, owner: req.Owner, flock: req.Flock, write: req.Type == lockWrite,
		start: req.Start, end: req.End, pid: req.Pid}
	if want.flock {
		want.start, want.end = 0, math.MaxInt64 // the kernel's OFFSET_MAX
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		now := time.Now()
		t.expire(now)
		switch req.Op {
		case filerpb.PosixLockRequest_END_SESSION:
			t.dropSession(req.Session)
			return &filerpb.PosixLockResponse{}, nil
		case filerpb.PosixLockRequest_KEEPALIVE:
			if _, ok := t.sessions[req.Session]; ok {
				t.sessions[req.Session] = now
			}
			return &filerpb.PosixLockResponse{}, nil
		}
		t.sessions[req.Session] = now
		if req.Type == lockUnlock {
			if req.Op != filerpb.PosixLockRequest_TEST {
				t.put(req.Path, want, true)
			}
			return &filerpb.PosixLockResponse{Type: lockUnlock}, nil
		}
		if l, ok := t.conflict(req.Path, want); ok {
			if req.Op != filerpb.PosixLockRequest_SET_WAIT {
				typ := uint32(lockRead)
				if l.write {
					typ = lockWrite
				}
				return &filerpb.PosixLockResponse{Conflict: true, Type: typ, Start: l.start, End: l.end, Pid: l.pid}, nil
			}
			w, h := holderOf(want), holderOf(l)
			if !want.flock {
				if t.deadlock(w, h) {
					return nil, status.Error(codes.Aborted, "posix lock: deadlock")
				}
				t.waitsFor(w, h)
			}
			ch := t.changed
			t.mu.Unlock()
			timer := time.NewTimer(t.lease / 3)
			var err error
			select {
			case <-ch:
			case <-timer.C: // a holder's lease may have run out
			case <-ctx.Done():
				err = status.FromContextError(ctx.Err()).Err()
			}
			timer.Stop()
			t.mu.Lock()
			if !want.flock {
				t.doneWaiting(w, h)
			}
			if err != nil {
				return nil, err
			}
			continue
		}
		if req.Op == filerpb.PosixLockRequest_TEST {
			return &filerpb.PosixLockResponse{Type: lockUnlock}, nil
		}
		t.put(req.Path, want, false)
		return &filerpb.PosixLockResponse{}, nil
	}
}

func (g *grpcServer) PosixLock(ctx context.Context, req *filerpb.PosixLockRequest) (*filerpb.PosixLockResponse, error) {
	return g.s.plocks.do(ctx, req)
}

// statfsCache keeps the last capacity figures for a few seconds: df on
// every mount must not become a master request each.
type statfsCache struct {
	mu   sync.Mutex
	at   time.Time
	resp *filerpb.StatfsResponse
}

const statfsFresh = 5 * time.Second

// Statfs sums the master's topology: total is every volume slot filled to
// the size limit, used the bytes in volumes, free what is left of that,
// bounded by the disks' free space.
func (g *grpcServer) Statfs(ctx context.Context, req *filerpb.StatfsRequest) (*filerpb.StatfsResponse, error) {
	if req.GetPath() != "" && req.GetPath() != "/" {
		q, err := g.s.filer.NearestQuota(ctx, req.GetPath())
		if err != nil {
			return nil, grpcError(g.s.log, "Statfs", err)
		}
		if q != nil && q.MaxBytes > 0 {
			return &filerpb.StatfsResponse{Quota: true, TotalBytes: uint64(q.MaxBytes), UsedBytes: uint64(q.UsedBytes),
				FreeBytes: uint64(max(q.MaxBytes-q.UsedBytes, 0)), Files: uint64(q.UsedFiles), MaxFiles: uint64(q.MaxFiles)}, nil
		}
	}
	c := &g.s.statfs
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.resp != nil && time.Since(c.at) < statfsFresh {
		return c.resp, nil
	}
	if g.s.client == nil {
		return nil, status.Error(codes.Unavailable, "filer: no master configured")
	}
	var st struct {
		Topology topology.Status `json:"topology"`
	}
	if err := g.s.client.MasterGetJSON(ctx, "/dir/status", &st); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	resp := capacityOf(st.Topology)
	c.resp, c.at = resp, time.Now()
	return resp, nil
}

func capacityOf(st topology.Status) *filerpb.StatfsResponse {
	var total, used, diskFree, files uint64
	for _, dc := range st.DataCenters {
		for _, r := range dc.Racks {
			for _, n := range r.Nodes {
				total += uint64(n.MaxVolumes) * st.VolumeSizeLimit
				for _, d := range n.Disks {
					diskFree += d.FreeBytes
					for _, v := range d.Volumes {
						used += v.Size
						if v.FileCount > v.DeleteCount {
							files += v.FileCount - v.DeleteCount
						}
					}
				}
			}
		}
	}
	if used > total {
		total = used
	}
	free := total - used
	if diskFree > 0 && diskFree < free {
		free = diskFree
	}
	return &filerpb.StatfsResponse{TotalBytes: total, UsedBytes: used, FreeBytes: free, Files: files}
}
