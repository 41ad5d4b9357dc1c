package webdav

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	xwebdav "golang.org/x/net/webdav"

	"github.com/kelpfs/kelp/internal/fsview"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// LOCK is served here, not by x/net/webdav, whose handler refuses shared
// locks (501): shared and exclusive write locks, Depth 0 or infinity,
// refresh with an empty body and the token in the If header (RFC 4918 9.10).

// lockInfo is the body of a LOCK that creates a lock.
type lockInfo struct {
	XMLName   xml.Name  `xml:"DAV: lockinfo"`
	Exclusive *struct{} `xml:"DAV: lockscope>exclusive"`
	Shared    *struct{} `xml:"DAV: lockscope>shared"`
	Write     *struct{} `xml:"DAV: locktype>write"`
	Owner     *struct {
		InnerXML string `xml:",innerxml"`
	} `xml:"DAV: owner"`
}

// activeLock is a lock as lockdiscovery shows it; root is a view path.
type activeLock struct {
	token, root, owner string
	shared, zeroDepth  bool
	left               time.Duration // negative: infinite
}

func activeFromPB(v *fsview.FS, l *filerpb.DavActiveLock) activeLock {
	return activeLock{token: l.Token, root: viewName(v, l.Root), owner: l.OwnerXml, shared: l.Shared,
		zeroDepth: l.ZeroDepth, left: time.Duration(l.DurationNs)}
}

// xml writes the activelock element (RFC 4918 14.1).
func (l activeLock) xml(b *strings.Builder) {
	scope, depth, timeout := "exclusive", "infinity", "Infinite"
	if l.shared {
		scope = "shared"
	}
	if l.zeroDepth {
		depth = "0"
	}
	if l.left >= 0 {
		timeout = "Second-" + strconv.FormatInt(int64((l.left+time.Second-1)/time.Second), 10)
	}
	fmt.Fprintf(b, "<D:activelock><D:locktype><D:write/></D:locktype><D:lockscope><D:%s/></D:lockscope>"+
		"<D:depth>%s</D:depth>", scope, depth)
	if l.owner != "" {
		fmt.Fprintf(b, "<D:owner>%s</D:owner>", l.owner)
	}
	fmt.Fprintf(b, "<D:timeout>%s</D:timeout><D:locktoken><D:href>%s</D:href></D:locktoken>"+
		"<D:lockroot><D:href>%s</D:href></D:lockroot></D:activelock>", timeout, escapeXML(l.token), escapeXML(hrefOf(l.root)))
}

func hrefOf(name string) string { return (&url.URL{Path: name}).EscapedPath() }

func escapeXML(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// parseTimeout reads a Timeout header (RFC 4918 10.7): the first value
// understood wins; none (or only unknown ones) is def.
func parseTimeout(h string, def time.Duration) time.Duration {
	for _, v := range strings.Split(h, ",") {
		v = strings.TrimSpace(v)
		if v == "Infinite" {
			return -1
		}
		if s, ok := strings.CutPrefix(v, "Second-"); ok {
			if n, err := strconv.ParseUint(s, 10, 32); err == nil {
				return time.Duration(n) * time.Second
			}
		}
	}
	return def
}

// serveLock serves LOCK.
func serveLock(w http.ResponseWriter, r *http.Request, v *fsview.FS) {
	// The handler has read the body already, bounded (413 past maxBody):
	// this reads it from memory.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		refreshLock(w, r, v)
		return
	}
	var li lockInfo
	if err := xml.Unmarshal(body, &li); err != nil {
		http.Error(w, "malformed lockinfo: "+err.Error(), http.StatusBadRequest)
		return
	}
	if (li.Exclusive == nil) == (li.Shared == nil) || li.Write == nil {
		http.Error(w, "lockinfo needs one lockscope (exclusive or shared) and locktype write", http.StatusBadRequest)
		return
	}
	zeroDepth := false
	switch r.Header.Get("Depth") {
	case "", "infinity", "Infinity":
	case "0":
		zeroDepth = true
	default:
		http.Error(w, "Depth on LOCK is 0 or infinity", http.StatusBadRequest)
		return
	}
	createLock(w, r, v, li, zeroDepth)
}

func createLock(w http.ResponseWriter, r *http.Request, v *fsview.FS, li lockInfo, zeroDepth bool) {
	ctx, name := r.Context(), r.URL.Path
	_, statErr := v.Lookup(ctx, name)
	if statErr != nil {
		if !missing(fsview.Errno(statErr)) {
			http.Error(w, statErr.Error(), http.StatusServiceUnavailable)
			return
		}
		if a, err := v.Lookup(ctx, path.Dir(path.Clean("/"+name))); err != nil || !a.Mode.IsDir() {
			http.Error(w, "the parent collection is missing", http.StatusConflict)
			return
		}
	}
	owner := ""
	if li.Owner != nil {
		owner = li.Owner.InnerXML
	}
	dur := parseTimeout(r.Header.Get("Timeout"), -1)
	resp, err := callLocks(ctx, v, &filerpb.DavLockRequest{Op: filerpb.DavLockRequest_CREATE, Root: v.FilerPath(name),
		Shared: li.Shared != nil, ZeroDepth: zeroDepth, OwnerXml: owner, DurationNs: int64(dur)})
	if err != nil {
		lockError(w, err)
		return
	}
	code := http.StatusOK
	if statErr != nil {
		// RFC 4918 7.3: a LOCK of an unmapped URL creates an empty resource.
		f, err := fileSystem{v: v}.OpenFile(ctx, name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err == nil {
			err = f.Close()
		}
		if err != nil {
			callLocks(ctx, v, &filerpb.DavLockRequest{Op: filerpb.DavLockRequest_UNLOCK, Token: resp.Token})
			http.Error(w, "creating the resource: "+err.Error(), http.StatusConflict)
			return
		}
		code = http.StatusCreated
	}
	w.Header().Set("Lock-Token", "<"+resp.Token+">")
	writeLockDiscovery(w, code, activeLock{token: resp.Token, root: path.Clean("/" + name), owner: owner,
		shared: li.Shared != nil, zeroDepth: zeroDepth, left: dur})
}

// refreshLock serves a LOCK without a body: the If header names the lock.
func refreshLock(w http.ResponseWriter, r *http.Request, v *fsview.FS) {
	tokens := ifTokens(r.Header.Get("If"))
	if len(tokens) != 1 {
		http.Error(w, "a lock refresh needs the lock's token, alone, in an If header", http.StatusBadRequest)
		return
	}
	resp, err := callLocks(r.Context(), v, &filerpb.DavLockRequest{Op: filerpb.DavLockRequest_REFRESH,
		Token: tokens[0], Root: v.FilerPath(r.URL.Path), DurationNs: int64(parseTimeout(r.Header.Get("Timeout"), 0))})
	if err != nil {
		if errors.Is(err, xwebdav.ErrNoSuchLock) {
			// RFC 4918 9.10.6: the token does not name a lock of the resource.
			http.Error(w, "no such lock on this resource", http.StatusPreconditionFailed)
			return
		}
		lockError(w, err)
		return
	}
	writeLockDiscovery(w, http.StatusOK, activeLock{token: resp.Token, root: viewName(v, resp.Root), owner: resp.OwnerXml,
		shared: resp.Shared, zeroDepth: resp.ZeroDepth, left: time.Duration(resp.DurationNs)})
}

func lockError(w http.ResponseWriter, err error) {
	if errors.Is(err, xwebdav.ErrLocked) {
		http.Error(w, "locked", http.StatusLocked)
		return
	}
	http.Error(w, "lock table: "+err.Error(), http.StatusServiceUnavailable)
}

func writeLockDiscovery(w http.ResponseWriter, code int, l activeLock) {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="utf-8"?>` + "\n" + `<D:prop xmlns:D="DAV:"><D:lockdiscovery>`)
	l.xml(&b)
	b.WriteString("</D:lockdiscovery></D:prop>")
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	w.WriteHeader(code)
	io.WriteString(w, b.String())
}
