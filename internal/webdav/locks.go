package webdav

import (
	"context"
	"path"
	"strings"
	"time"

	xwebdav "golang.org/x/net/webdav"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/fsview"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// filerLS is x/net/webdav's LockSystem kept in the filer (filerpb DavLock):
// every WebDAV server of the filer shares the locks, and they survive a
// restart of the WebDAV process. Names are mapped to filer paths, so two
// servers with different roots agree on what is locked. The filer's clock
// decides expiry; the now argument is not used.
type filerLS struct{ v *fsview.FS }

var _ xwebdav.LockSystem = filerLS{}

// lockTimeout bounds one call to the filer's lock table.
const lockTimeout = 10 * time.Second

func (l filerLS) call(req *filerpb.DavLockRequest) (*filerpb.DavLockResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
	defer cancel()
	r, err := l.v.FilerClient().DavLock(ctx, req)
	if err == nil {
		return r, nil
	}
	switch status.Code(err) {
	case codes.FailedPrecondition:
		return nil, xwebdav.ErrLocked
	case codes.NotFound:
		return nil, xwebdav.ErrNoSuchLock
	case codes.Aborted:
		return nil, xwebdav.ErrConfirmationFailed
	case codes.PermissionDenied:
		return nil, xwebdav.ErrForbidden
	}
	return nil, err
}

// full maps a WebDAV name ("" for none) to a filer path.
func (l filerLS) full(name string) string {
	if name == "" {
		return ""
	}
	return l.v.FilerPath(name)
}

// viewName maps a filer path back to the server's name space.
func (l filerLS) viewName(full string) string {
	root := l.v.Root()
	if root == "/" {
		return full
	}
	if full == root {
		return "/"
	}
	if rest, ok := strings.CutPrefix(full, root+"/"); ok {
		return "/" + rest
	}
	return path.Join("/", full) // locked through a server with another root
}

func (l filerLS) Confirm(now time.Time, name0, name1 string, conditions ...xwebdav.Condition) (func(), error) {
	req := &filerpb.DavLockRequest{Op: filerpb.DavLockRequest_CONFIRM, Name0: l.full(name0), Name1: l.full(name1)}
	for _, c := range conditions {
		req.Conditions = append(req.Conditions, &filerpb.DavCondition{Not: c.Not, Token: c.Token, Etag: c.ETag})
	}
	if _, err := l.call(req); err != nil {
		return nil, err
	}
	return func() {}, nil
}

func (l filerLS) Create(now time.Time, details xwebdav.LockDetails) (string, error) {
	r, err := l.call(&filerpb.DavLockRequest{Op: filerpb.DavLockRequest_CREATE, Root: l.full(details.Root),
		ZeroDepth: details.ZeroDepth, OwnerXml: details.OwnerXML, DurationNs: int64(details.Duration)})
	if err != nil {
		return "", err
	}
	return r.Token, nil
}

func (l filerLS) Refresh(now time.Time, token string, duration time.Duration) (xwebdav.LockDetails, error) {
	r, err := l.call(&filerpb.DavLockRequest{Op: filerpb.DavLockRequest_REFRESH, Token: token, DurationNs: int64(duration)})
	if err != nil {
		return xwebdav.LockDetails{}, err
	}
	return xwebdav.LockDetails{Root: l.viewName(r.Root), Duration: time.Duration(r.DurationNs), OwnerXML: r.OwnerXml, ZeroDepth: r.ZeroDepth}, nil
}

func (l filerLS) Unlock(now time.Time, token string) error {
	_, err := l.call(&filerpb.DavLockRequest{Op: filerpb.DavLockRequest_UNLOCK, Token: token})
	return err
}
