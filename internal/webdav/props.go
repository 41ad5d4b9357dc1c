package webdav

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"log/slog"
	"net/http"
	"strings"

	xwebdav "golang.org/x/net/webdav"

	"github.com/kelpfs/kelp/internal/fsview"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// Dead properties (PROPPATCH) are extended attributes of the file or
// collection: "user.dav:{namespace}local" holds {"xml": inner XML, "lang":
// xml:lang} as JSON. So they persist in the filer, show in PROPFIND
// (named, allprop, propname), and a mount sees them with getfattr.

const deadPropPrefix = "user.dav:"

type storedProp struct {
	XML  string `json:"xml"`
	Lang string `json:"lang,omitempty"`
}

func propKey(n xml.Name) string { return deadPropPrefix + "{" + n.Space + "}" + n.Local }

func parsePropKey(k string) (xml.Name, bool) {
	rest, ok := strings.CutPrefix(k, deadPropPrefix+"{")
	if !ok {
		return xml.Name{}, false
	}
	i := strings.LastIndexByte(rest, '}')
	if i < 0 || i == len(rest)-1 {
		return xml.Name{}, false
	}
	return xml.Name{Space: rest[:i], Local: rest[i+1:]}, true
}

// deadProps reads the dead properties of view path name.
func deadProps(ctx context.Context, v *fsview.FS, name string) (map[xml.Name]xwebdav.Property, error) {
	keys, err := v.ListXattr(ctx, name)
	if err != nil {
		return nil, osErr("propfind", name, err)
	}
	out := map[xml.Name]xwebdav.Property{}
	for _, k := range keys {
		n, ok := parsePropKey(k)
		if !ok {
			continue
		}
		b, err := v.GetXattr(ctx, name, k)
		if err != nil {
			continue // removed meanwhile
		}
		var sp storedProp
		if json.Unmarshal(b, &sp) != nil {
			continue
		}
		out[n] = xwebdav.Property{XMLName: n, Lang: sp.Lang, InnerXML: []byte(sp.XML)}
	}
	return out, nil
}

// patchProps applies a PROPPATCH in one filer update.
func patchProps(ctx context.Context, v *fsview.FS, name string, patches []xwebdav.Proppatch) ([]xwebdav.Propstat, error) {
	set := map[string][]byte{}
	var remove []string
	st := xwebdav.Propstat{Status: http.StatusOK}
	for _, p := range patches {
		for _, prop := range p.Props {
			if prop.XMLName == lockDiscoveryName {
				continue // COPY of a PROPFIND-time value, not a property
			}
			k := propKey(prop.XMLName)
			if p.Remove {
				delete(set, k)
				remove = append(remove, k)
			} else {
				b, err := json.Marshal(storedProp{XML: string(prop.InnerXML), Lang: prop.Lang})
				if err != nil {
					return nil, err
				}
				set[k] = b
			}
			st.Props = append(st.Props, xwebdav.Property{XMLName: prop.XMLName})
		}
	}
	if err := v.PatchXattrs(ctx, name, set, remove); err != nil {
		return nil, osErr("proppatch", name, err)
	}
	return []xwebdav.Propstat{st}, nil
}

func (f *file) DeadProps() (map[xml.Name]xwebdav.Property, error) {
	props, err := deadProps(context.Background(), f.v, f.name)
	if err == nil {
		f.locks.addTo(props, f.name)
	}
	return props, err
}

func (f *file) Patch(p []xwebdav.Proppatch) ([]xwebdav.Propstat, error) {
	return patchProps(context.Background(), f.v, f.name, p)
}

func (d *dir) DeadProps() (map[xml.Name]xwebdav.Property, error) {
	props, err := deadProps(context.Background(), d.v, d.name)
	if err == nil {
		d.locks.addTo(props, d.name)
	}
	return props, err
}

func (d *dir) Patch(p []xwebdav.Proppatch) ([]xwebdav.Propstat, error) {
	return patchProps(context.Background(), d.v, d.name, p)
}

// lockDiscoveryName is DAV:lockdiscovery. x/net/webdav has no value for
// it (its LockSystem cannot list locks), so PROPFIND gets it as if it were
// a dead property, from the locks listed once per request (lockSnap); a
// client cannot set it (x/net/webdav refuses a PROPPATCH of a live name),
// and COPY, which copies dead properties, skips it (patchProps).
var lockDiscoveryName = xml.Name{Space: "DAV:", Local: "lockdiscovery"}

// lockSnap is the locks on and below a PROPFIND's resource (and those
// above that cover it), listed from the filer once for the request.
type lockSnap struct {
	v     *fsview.FS
	locks []activeLock // roots are filer paths
}

type lockSnapKey struct{}

// snapLocks lists the locks a PROPFIND of name may show.
func snapLocks(ctx context.Context, v *fsview.FS, name string) (*lockSnap, error) {
	r, err := callLocks(ctx, v, &filerpb.DavLockRequest{Op: filerpb.DavLockRequest_LIST, Root: v.FilerPath(name)})
	if err != nil {
		return nil, err
	}
	s := &lockSnap{v: v}
	for _, l := range r.Locks {
		a := activeFromPB(v, l)
		a.root = l.Root
		s.locks = append(s.locks, a)
	}
	return s, nil
}

// discovery is the lockdiscovery value of view path name.
func (s *lockSnap) discovery(name string) string {
	full := s.v.FilerPath(name)
	var b strings.Builder
	for _, l := range s.locks {
		if l.root == full || (!l.zeroDepth && (l.root == "/" || strings.HasPrefix(full, l.root+"/"))) {
			l.root = viewName(s.v, l.root)
			l.xml(&b)
		}
	}
	return b.String()
}

// addTo adds lockdiscovery to the dead properties of view path name
// when the request listed the locks (s not nil).
func (s *lockSnap) addTo(props map[xml.Name]xwebdav.Property, name string) {
	if s != nil {
		props[lockDiscoveryName] = xwebdav.Property{XMLName: lockDiscoveryName, InnerXML: []byte(s.discovery(name))}
	}
}

var (
	_ xwebdav.DeadPropsHolder = (*file)(nil)
	_ xwebdav.DeadPropsHolder = (*dir)(nil)
)

// propfindLocks prepares a PROPFIND: the locks lockdiscovery shows, listed
// once, and supportedlock with shared locks, which x/net/webdav's lacks.
// The caller calls the writer's finish once the engine is done.
func propfindLocks(w http.ResponseWriter, r *http.Request, v *fsview.FS, log *slog.Logger) (*replacingWriter, *http.Request) {
	snap, err := snapLocks(r.Context(), v, r.URL.Path)
	if err != nil {
		log.Warn("webdav: listing locks for lockdiscovery", "path", r.URL.Path, "err", err)
	} else {
		r = r.WithContext(context.WithValue(r.Context(), lockSnapKey{}, snap))
	}
	return &replacingWriter{ResponseWriter: w, old: []byte(engineSupportedLock), new: []byte(supportedLock)}, r
}

// engineSupportedLock is x/net/webdav's supportedlock value (exclusive
// write locks only); supportedLock is Kelp's.
const (
	engineSupportedLock = `<D:lockentry xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockentry>`
	supportedLock       = `<D:lockentry xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockentry>` +
		`<D:lockentry xmlns:D="DAV:"><D:lockscope><D:shared/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockentry>`
)

// replacingWriter replaces old by new in the body, also across writes: it
// holds back a tail shorter than old until the next write or Flush.
type replacingWriter struct {
	http.ResponseWriter
	old, new []byte
	held     []byte
}

func (w *replacingWriter) WriteHeader(code int) {
	w.Header().Del("Content-Length") // the body's length changes
	w.ResponseWriter.WriteHeader(code)
}

func (w *replacingWriter) Write(p []byte) (int, error) {
	buf := bytes.ReplaceAll(append(w.held, p...), w.old, w.new)
	keep := 0
	// The longest tail that may start an occurrence of old is held back.
	for k := min(len(w.old)-1, len(buf)); k > 0; k-- {
		if bytes.HasPrefix(w.old, buf[len(buf)-k:]) {
			keep = k
			break
		}
	}
	w.held = append([]byte(nil), buf[len(buf)-keep:]...)
	if _, err := w.ResponseWriter.Write(buf[:len(buf)-keep]); err != nil {
		return 0, err
	}
	return len(p), nil
}

// finish writes what is held back.
func (w *replacingWriter) finish() {
	if len(w.held) > 0 {
		w.ResponseWriter.Write(w.held)
		w.held = nil
	}
}
