package filerserver

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// The WebDAV lock table (RFC 4918 write locks), keyed by filer path. A lock
// is shared or exclusive, of depth 0 or infinity. Two locks conflict unless
// both are shared when one covers the other's root: a lock covers its root
// and, at depth infinity, everything below. A write (CONFIRM) must submit,
// for every lock root that protects what it changes, a token of a lock
// there; a DELETE, MOVE or COPY changes a whole subtree, so locks below its
// target protect it too (the deep check).

// davLock is one held lock.
type davLock struct {
	token     string
	root      string
	shared    bool
	zeroDepth bool
	temp      bool // a request's guard (x/net/webdav's temporary lock)
	owner     string
	duration  time.Duration // negative: infinite
	expiry    time.Time     // zero: never
}

// covers reports whether a write to p is protected by l.
func (l *davLock) covers(p string) bool {
	return l.root == p || (!l.zeroDepth && isBelow(p, l.root))
}

// isBelow reports whether p is strictly inside directory dir.
func isBelow(p, dir string) bool {
	if dir == "/" {
		return p != "/" && strings.HasPrefix(p, "/")
	}
	return strings.HasPrefix(p, dir+"/")
}

// davLocks is the table; the table is small (the locks clients hold), so
// every check scans it.
type davLocks struct {
	mu      sync.Mutex
	byToken map[string]*davLock
}

func newDavLocks() *davLocks { return &davLocks{byToken: map[string]*davLock{}} }

// newToken is an opaquelocktoken URI no one can guess (RFC 4918 6.5) and
// that no filer restart repeats.
func newToken() string {
	var b [16]byte
	rand.Read(b[:])
	return "opaquelocktoken:" + hex.EncodeToString(b[:])
}

// expire drops the locks whose timeout passed; callers hold mu.
func (d *davLocks) expire(now time.Time) {
	for t, l := range d.byToken {
		if !l.expiry.IsZero() && !now.Before(l.expiry) {
			delete(d.byToken, t)
		}
	}
}

func expiryOf(now time.Time, dur time.Duration) time.Time {
	if dur < 0 {
		return time.Time{}
	}
	return now.Add(dur)
}

// related reports whether lock l matters to a change of p: l covers p,
// or, for a change of the subtree (deep), l lies below p.
func related(l *davLock, p string, deep bool) bool {
	return l.covers(p) || (deep && isBelow(l.root, p))
}

// create adds a lock unless one in the way conflicts.
func (d *davLocks) create(now time.Time, req *filerpb.DavLockRequest) (*davLock, error) {
	root := req.Root
	if root == "" || !strings.HasPrefix(root, "/") {
		return nil, status.Error(codes.InvalidArgument, "dav lock: no root")
	}
	deep := req.Deep || !req.ZeroDepth
	for _, l := range d.byToken {
		if related(l, root, deep) && !(req.Shared && l.shared) {
			return nil, status.Error(codes.FailedPrecondition, "locked")
		}
	}
	dur := time.Duration(req.DurationNs)
	l := &davLock{token: newToken(), root: root, shared: req.Shared, zeroDepth: req.ZeroDepth, temp: req.Temp,
		owner: req.OwnerXml, duration: dur, expiry: expiryOf(now, dur)}
	d.byToken[l.token] = l
	return l, nil
}

// confirm checks a write: every token condition of the If header's list
// must hold for what it names (else Aborted: the list is false, RFC 4918
// 10.4), and every lock root protecting a target must be unlocked by a
// submitted token (else FailedPrecondition: 423 Locked).
func (d *davLocks) confirm(req *filerpb.DavLockRequest) error {
	// The list applies to one resource (x/net/webdav passes the COPY
	// destination as name1 with no name0); the other target of a MOVE is
	// checked for locks below, not against the list.
	if name := cmp.Or(req.Name0, req.Name1); name != "" && !d.listHolds(req.Conditions, name) {
		return status.Error(codes.Aborted, "confirmation failed")
	}
	submitted := map[string]bool{}
	for _, t := range req.Tokens {
		submitted[t] = true
	}
	for _, c := range req.Conditions {
		if !c.Not && c.Token != "" {
			submitted[c.Token] = true
		}
	}
	for _, t := range req.Targets {
		if !d.unlockedFor(t, req.Deep, submitted) {
			return status.Error(codes.FailedPrecondition, "locked")
		}
	}
	return nil
}

// listHolds reports whether every token condition of a list holds for
// name: the token is a live lock related to name, covering it or below it
// (with Not: it is not). Entity-tag conditions are the WebDAV server's to
// compare (it knows the tags it serves); one that reaches here is skipped,
// as it always was. A list of no token conditions holds.
func (d *davLocks) listHolds(conds []*filerpb.DavCondition, name string) bool {
	for _, c := range conds {
		if c.Token == "" {
			continue
		}
		l := d.byToken[c.Token]
		if held := l != nil && !l.temp && related(l, name, true); held == c.Not {
			return false
		}
	}
	return true
}

// unlockedFor reports whether the submitted tokens open every lock root
// that protects a write of target: one token per root suffices (the root's
// locks are all shared, or it is the one exclusive lock).
func (d *davLocks) unlockedFor(target string, deep bool, submitted map[string]bool) bool {
	open := map[string]bool{} // lock root -> a token of it was submitted
	for _, l := range d.byToken {
		if related(l, target, deep) {
			open[l.root] = open[l.root] || submitted[l.token]
		}
	}
	for _, ok := range open {
		if !ok {
			return false
		}
	}
	return true
}

// dropBelow removes the client locks rooted at root or below: root was
// deleted or moved away, and a lock goes with its resource (RFC 4918 7.7,
// 9.6.1).
func (d *davLocks) dropBelow(root string) {
	for t, l := range d.byToken {
		if !l.temp && (l.root == root || isBelow(l.root, root)) {
			delete(d.byToken, t)
		}
	}
}

// list returns the client locks that cover root or lie below it.
func (d *davLocks) list(now time.Time, root string) []*filerpb.DavActiveLock {
	var out []*filerpb.DavActiveLock
	for _, l := range d.byToken {
		if l.temp || !related(l, root, true) {
			continue
		}
		left := time.Duration(-1)
		if !l.expiry.IsZero() {
			left = l.expiry.Sub(now)
		}
		out = append(out, &filerpb.DavActiveLock{Token: l.token, Root: l.root, ZeroDepth: l.zeroDepth,
			OwnerXml: l.owner, DurationNs: int64(left), Shared: l.shared})
	}
	return out
}

// DavLock serves the WebDAV lock table; times are the filer's clock.
func (g *grpcServer) DavLock(ctx context.Context, req *filerpb.DavLockRequest) (*filerpb.DavLockResponse, error) {
	d, now := g.s.dlocks, time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expire(now)
	switch req.Op {
	case filerpb.DavLockRequest_CONFIRM:
		// The confirmation is not held across calls: two requests with the
		// same token may run at once, as they may on two WebDAV servers.
		if err := d.confirm(req); err != nil {
			return nil, err
		}
		return &filerpb.DavLockResponse{}, nil
	case filerpb.DavLockRequest_CREATE:
		l, err := d.create(now, req)
		if err != nil {
			return nil, err
		}
		return &filerpb.DavLockResponse{Token: l.token}, nil
	case filerpb.DavLockRequest_REFRESH:
		l := d.byToken[req.Token]
		if l == nil || (req.Root != "" && !l.covers(req.Root)) {
			return nil, status.Error(codes.NotFound, "no such lock")
		}
		if req.DurationNs != 0 {
			l.duration = time.Duration(req.DurationNs)
		}
		l.expiry = expiryOf(now, l.duration)
		return &filerpb.DavLockResponse{Token: l.token, Root: l.root, ZeroDepth: l.zeroDepth,
			OwnerXml: l.owner, DurationNs: int64(l.duration), Shared: l.shared}, nil
	case filerpb.DavLockRequest_UNLOCK:
		if req.Token == "" && req.Deep {
			d.dropBelow(req.Root)
			return &filerpb.DavLockResponse{}, nil
		}
		l := d.byToken[req.Token]
		if l == nil || (req.Root != "" && !l.covers(req.Root)) {
			return nil, status.Error(codes.NotFound, "no such lock")
		}
		delete(d.byToken, req.Token)
		return &filerpb.DavLockResponse{}, nil
	case filerpb.DavLockRequest_LIST:
		return &filerpb.DavLockResponse{Locks: d.list(now, req.Root)}, nil
	}
	return nil, status.Error(codes.InvalidArgument, "dav lock: unknown op")
}
