package webdav

import (
	"cmp"
	"context"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	xwebdav "golang.org/x/net/webdav"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/fsview"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// filerLS is x/net/webdav's LockSystem kept in the filer (filerpb DavLock,
// internal/filerserver/davlocks.go): every WebDAV server of the filer
// shares the locks, and they survive a restart of the WebDAV process.
// Names are mapped to filer paths, so two servers with different roots
// agree on what is locked. The filer's clock decides expiry; the now
// argument is not used.
//
// One filerLS serves one request: it knows what the request writes, so a
// confirmation checks the real targets with every token the request
// submitted, and the locks below a collection that a DELETE, MOVE or COPY
// replaces (x/net/webdav checks the resource and its ancestors only).
type filerLS struct {
	v   *fsview.FS
	req *lockReq
}

// lockReq is what one request writes, and what its lock checks found.
type lockReq struct {
	ctx     context.Context
	targets []string // filer paths
	deep    bool     // the request replaces or removes whole subtrees
	tokens  []string // every lock token of its If header
	root    string   // UNLOCK: the filer path the token must cover
	locked  bool     // a confirmation found a lock in the way (423)
}

var _ xwebdav.LockSystem = filerLS{}

// guardTimeout bounds a request's guard lock.
const guardTimeout = time.Hour

// lockTimeout bounds one call to the filer's lock table.
const lockTimeout = 10 * time.Second

// newLockReq describes request r for the lock checks.
func newLockReq(v *fsview.FS, r *http.Request) *lockReq {
	lr := &lockReq{ctx: r.Context(), deep: r.Method != "PROPPATCH", tokens: ifTokens(r.Header.Get("If"))}
	dst := ""
	if d := r.Header.Get("Destination"); d != "" {
		if u, err := url.Parse(d); err == nil && u.Path != "" {
			dst = v.FilerPath(u.Path)
		}
	}
	src := v.FilerPath(r.URL.Path)
	switch r.Method {
	case "COPY":
		lr.targets = []string{dst}
	case "MOVE":
		lr.targets = []string{src, dst}
	case "UNLOCK":
		lr.root = src
	default:
		lr.targets = []string{src}
	}
	return lr
}

func (l filerLS) call(req *filerpb.DavLockRequest) (*filerpb.DavLockResponse, error) {
	return callLocks(l.req.ctx, l.v, req)
}

// callLocks runs one request on the filer's lock table, with x/net/webdav's
// errors for the filer's codes.
func callLocks(ctx context.Context, v *fsview.FS, req *filerpb.DavLockRequest) (*filerpb.DavLockResponse, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lockTimeout)
	defer cancel()
	r, err := v.FilerClient().DavLock(ctx, req)
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
func viewName(v *fsview.FS, full string) string {
	root := v.Root()
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

// Confirm is called with the conditions of one list of the If header;
// x/net/webdav answers 500 to an error other than ErrConfirmationFailed,
// so a lock in the way is noted in the request (lockedWriter makes it 423).
//
// The list holds when every condition does (RFC 4918 10.4): an entity tag
// is compared here with the one served for the list's resource; the lock
// tokens go to the filer, which holds the locks.
func (l filerLS) Confirm(now time.Time, name0, name1 string, conditions ...xwebdav.Condition) (func(), error) {
	req := &filerpb.DavLockRequest{Op: filerpb.DavLockRequest_CONFIRM, Name0: l.full(name0), Name1: l.full(name1),
		Targets: l.req.targets, Deep: l.req.deep, Tokens: l.req.tokens}
	resource := cmp.Or(name0, name1) // the filer's confirm names the same one
	for _, c := range conditions {
		if c.Token == "" {
			if l.etagIs(resource, c.ETag) == c.Not {
				return nil, xwebdav.ErrConfirmationFailed
			}
			continue
		}
		req.Conditions = append(req.Conditions, &filerpb.DavCondition{Not: c.Not, Token: c.Token})
	}
	if _, err := l.call(req); err != nil {
		if err == xwebdav.ErrLocked {
			l.req.locked = true
		}
		return nil, err
	}
	return func() {}, nil
}

// etagIs reports whether the entity tag served for name is tag (strong
// comparison: a weak tag never matches).
func (l filerLS) etagIs(name, tag string) bool {
	if name == "" {
		return false
	}
	a, err := l.v.Lookup(l.req.ctx, cleanName(name))
	return err == nil && etagOf(a) == tag
}

// Create is only called by x/net/webdav for the guard lock of a write
// without an If header (LOCK is served by serveLock): a temporary
// exclusive lock that also conflicts with locks below a subtree the
// request replaces.
func (l filerLS) Create(now time.Time, details xwebdav.LockDetails) (string, error) {
	dur := details.Duration
	if dur < 0 || dur > guardTimeout {
		dur = guardTimeout // a WebDAV server that died mid-request must not leave it for ever
	}
	r, err := l.call(&filerpb.DavLockRequest{Op: filerpb.DavLockRequest_CREATE, Root: l.full(details.Root),
		ZeroDepth: details.ZeroDepth, OwnerXml: details.OwnerXML, DurationNs: int64(dur),
		Deep: l.req.deep, Temp: true})
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
	return xwebdav.LockDetails{Root: viewName(l.v, r.Root), Duration: time.Duration(r.DurationNs), OwnerXML: r.OwnerXml, ZeroDepth: r.ZeroDepth}, nil
}

// Unlock removes the lock; UNLOCK's token must be of a lock that covers
// the request's resource (else 409, RFC 4918 9.11.1).
func (l filerLS) Unlock(now time.Time, token string) error {
	_, err := l.call(&filerpb.DavLockRequest{Op: filerpb.DavLockRequest_UNLOCK, Token: token, Root: l.req.root})
	return err
}

// lockedWriter answers 423 Locked where x/net/webdav says 500 because a
// confirmation found a lock in the way.
type lockedWriter struct {
	http.ResponseWriter
	req      *lockReq
	replaced bool
	code     int
}

func (w *lockedWriter) WriteHeader(code int) {
	w.code = code
	if code == http.StatusInternalServerError && w.req.locked {
		w.replaced = true
		code = http.StatusLocked
		w.ResponseWriter.WriteHeader(code)
		w.ResponseWriter.Write([]byte(xwebdav.StatusText(code)))
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *lockedWriter) Write(b []byte) (int, error) {
	if w.replaced {
		return len(b), nil // the handler's "Internal Server Error"
	}
	return w.ResponseWriter.Write(b)
}

// ifTokens returns the lock tokens an If header submits (RFC 4918 10.4):
// the Coded-URLs inside its lists, not those after Not, not the resource
// tags outside the parentheses, not the entity tags in brackets.
func ifTokens(h string) []string {
	var out []string
	inList, not := false, false
	for i := 0; i < len(h); i++ {
		switch c := h[i]; {
		case c == '(':
			inList, not = true, false
		case c == ')':
			inList = false
		case c == '[':
			if j := strings.IndexByte(h[i:], ']'); j > 0 {
				i += j
			}
			not = false
		case c == '<':
			j := strings.IndexByte(h[i:], '>')
			if j < 0 {
				return out
			}
			if inList && !not {
				out = append(out, h[i+1:i+j])
			}
			i += j
			not = false
		case inList && strings.HasPrefix(h[i:], "Not"):
			not = true
			i += 2
		}
	}
	return out
}

// dropGone removes the locks of what a successful DELETE or MOVE took away
// from the request's path.
func dropGone(r *http.Request, v *fsview.FS, code int) {
	if (r.Method != "DELETE" && r.Method != "MOVE") || code/100 != 2 {
		return
	}
	callLocks(r.Context(), v, &filerpb.DavLockRequest{Op: filerpb.DavLockRequest_UNLOCK, Root: v.FilerPath(r.URL.Path), Deep: true})
}
