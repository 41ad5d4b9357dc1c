package webdav

import (
	"bytes"
	"cmp"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	xwebdav "golang.org/x/net/webdav"

	"github.com/kelpfs/kelp/internal/fsview"
	"github.com/kelpfs/kelp/internal/httpserve"
	"github.com/kelpfs/kelp/internal/metrics"
	"github.com/kelpfs/kelp/internal/security"
)

// Config describes a WebDAV server.
type Config struct {
	IP     string // address clients reach it at
	BindIP string // "" means IP
	Port   int    // 0 picks a free one
	// View is the filer directory served; Run connects it (waiting for a
	// filer that is still starting, as in `kelp server`).
	View fsview.Config
	// UsersFile, if set, turns on basic auth with the users it lists (see
	// LoadUsers).
	UsersFile string
	Logger    *slog.Logger
	// Metrics is the registry the server reports its requests to (label
	// op: the method); nil gives it a registry of its own (Metrics).
	Metrics *metrics.Registry
}

// Server is a WebDAV server over one view.
type Server struct {
	cfg     Config
	log     *slog.Logger
	users   *Users
	ln      net.Listener
	srv     *httpserve.Server
	mu      sync.Mutex
	view    *fsview.FS
	metrics *metrics.Registry

	closeOnce sync.Once
}

// New binds the listener; Run connects the view and serves.
func New(cfg Config) (*Server, error) {
	if cfg.IP == "" {
		cfg.IP = "127.0.0.1"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.View.Logger = cmp.Or(cfg.View.Logger, cfg.Logger)
	var users *Users
	if cfg.UsersFile != "" {
		u, err := LoadUsers(cfg.UsersFile)
		if err != nil {
			return nil, err
		}
		users = u
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(cmp.Or(cfg.BindIP, cfg.IP), strconv.Itoa(cfg.Port)))
	if err != nil {
		return nil, fmt.Errorf("webdav: %w", err)
	}
	cfg.Port = ln.Addr().(*net.TCPAddr).Port
	ln = security.Process().Listen(ln, security.Public) // TLS when configured; no client certificates
	s := &Server{cfg: cfg, log: cfg.Logger.With("service", "webdav"), ln: ln, users: users, metrics: metrics.OrNew(cfg.Metrics)}
	return s, nil
}

// URL is the server's base URL.
func (s *Server) URL() string {
	return security.URL(net.JoinHostPort(s.cfg.IP, strconv.Itoa(s.cfg.Port)))
}

// Run connects the view, then serves until ctx ends or Close is called.
func (s *Server) Run(ctx context.Context) error {
	v, err := fsview.New(ctx, s.cfg.View)
	if err != nil {
		s.Close()
		return fmt.Errorf("webdav: %w", err)
	}
	s.mu.Lock()
	s.view = v
	h := engine(v, s.log)
	if s.users != nil {
		h = requireAuth(s.users, h)
	}
	h = closeUnread(h)
	s.srv = httpserve.New(s.metrics.HTTP("webdav", nil, withHealthz(h)), s.log)
	s.mu.Unlock()
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	s.log.Info("webdav listening", "url", s.URL(), "filer", s.cfg.View.Filer, "root", s.cfg.View.Root)
	select {
	case <-ctx.Done():
	case err = <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
	}
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return err
}

// Close stops serving and flushes the view.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.mu.Lock()
		srv, v := s.srv, s.view
		s.mu.Unlock()
		if srv != nil {
			err = srv.Stop(5 * time.Second)
		} else {
			s.ln.Close()
		}
		if v != nil {
			if verr := v.Close(); err == nil {
				err = verr
			}
		}
	})
	return err
}

// maxBody bounds the XML body of PROPFIND, PROPPATCH, LOCK and the other
// methods but PUT: a larger one is 413 (or 400 once the engine read part).
const maxBody = 1 << 20

// Handler serves WebDAV (RFC 4918 classes 1 and 2) over v, with locks
// held in the filer (filerLS).
func Handler(v *fsview.FS, log *slog.Logger) http.Handler { return closeUnread(engine(v, log)) }

// engine is Handler without closeUnread (Run puts the auth check between).
func engine(v *fsview.FS, log *slog.Logger) http.Handler {
	logErr := func(r *http.Request, err error) {
		if err != nil {
			log.Debug("webdav request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hasDotDot(r.URL.Path) || badDestination(r.Header.Get("Destination")) {
			http.Error(w, "path with a .. segment", http.StatusBadRequest)
			return
		}
		if r.Method != http.MethodPut {
			if r.ContentLength > maxBody {
				http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		}
		if xmlBody(r.Method) && r.ContentLength != 0 {
			b, err := io.ReadAll(r.Body)
			var tooLarge *http.MaxBytesError
			switch {
			case errors.As(err, &tooLarge):
				http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
				return
			case err != nil:
				http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
				return
			case emptyPrefixNamespace(b):
				http.Error(w, "invalid XML: a namespace prefix declared for the empty name (xmlns:p=\"\")", http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		if r.Method == http.MethodPut {
			// x/net/webdav answers every PUT 201; RFC 4918 9.7.1 wants 201
			// only for a new resource, 200 or 204 for a replaced one.
			if a, err := v.Lookup(r.Context(), r.URL.Path); err == nil && !a.Mode.IsDir() {
				w = &replacedWriter{ResponseWriter: w}
			}
		}
		if r.Method == http.MethodPut {
			body, counted := r.Body.(*countedBody) // closeUnread's, when it counts this body already
			if !counted {
				body = &countedBody{ReadCloser: r.Body, want: r.ContentLength}
				r.Body = body
			}
			r = r.WithContext(context.WithValue(r.Context(), putBodyKey{}, body))
		}
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			slot := &openErr{}
			r = r.WithContext(context.WithValue(r.Context(), openErrKey{}, slot))
			if r.Method == http.MethodGet {
				// The status waits for the content's first bytes: a first
				// read that fails (every copy of a chunk unreachable) is a
				// 503, not a 200 whose body stops short.
				hw := httpserve.Hold(w)
				defer answerHeld(hw, slot)
				w = hw
			}
			w = &unreachableWriter{ResponseWriter: w, slot: slot}
		}
		if r.Method == "LOCK" {
			serveLock(w, r, v)
			return
		}
		if r.Method == "PROPFIND" {
			var rw *replacingWriter
			rw, r = propfindLocks(w, r, v, log)
			defer rw.finish()
			w = rw
		}
		// One engine per request: its lock system knows what the request
		// writes (filerLS).
		lr := newLockReq(v, r)
		h := &xwebdav.Handler{FileSystem: fileSystem{v: v}, LockSystem: filerLS{v: v, req: lr}, Logger: logErr}
		lw := &lockedWriter{ResponseWriter: w, req: lr}
		h.ServeHTTP(lw, r)
		dropGone(r, v, lw.code)
	})
}

// xmlBody reports whether method's request body is XML the engine parses.
func xmlBody(method string) bool {
	return method == "PROPFIND" || method == "PROPPATCH" || method == "LOCK"
}

// emptyPrefixNamespace reports whether an XML body binds a prefix to the
// empty namespace name, which Namespaces in XML 1.0 forbids (section 3:
// the value of a prefixed declaration must not be empty) and the engine's
// parser lets through. Bodies that are not well-formed are the engine's to
// refuse.
func emptyPrefixNamespace(body []byte) bool {
	d := xml.NewDecoder(bytes.NewReader(body))
	for {
		t, err := d.RawToken()
		if err != nil {
			return false
		}
		if se, ok := t.(xml.StartElement); ok {
			for _, a := range se.Attr {
				if a.Name.Space == "xmlns" && a.Value == "" {
					return true
				}
			}
		}
	}
}

// answerHeld lets a GET's held status go, or, when nothing was sent because
// the first read of the content failed, answers 503 instead.
func answerHeld(hw *httpserve.HeldStatus, slot *openErr) {
	if hw.Sent() {
		return
	}
	if slot.readErr == nil {
		hw.Send()
		return
	}
	hw.Retract()
	hw.Header().Set("Retry-After", "1")
	hw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	hw.ResponseWriter.WriteHeader(http.StatusServiceUnavailable)
	io.WriteString(hw.ResponseWriter, "content unreadable now: "+slot.readErr.Error()+"\n")
}

// unreachableWriter answers 503 where the handler says 404 because the
// view could not reach the filer (or a volume server): the file may well
// exist, and a 404 would tell a client (or a sync tool) it is gone.
type unreachableWriter struct {
	http.ResponseWriter
	slot     *openErr
	replaced bool
}

func (w *unreachableWriter) WriteHeader(code int) {
	if code == http.StatusNotFound && w.slot.err != nil && !missing(w.slot.err) {
		w.replaced = true
		w.Header().Set("Retry-After", "1")
		w.ResponseWriter.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w.ResponseWriter, "filer or volume server unreachable: "+w.slot.err.Error()+"\n")
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *unreachableWriter) Write(b []byte) (int, error) {
	if w.replaced {
		return len(b), nil // the handler's "Not Found" text
	}
	return w.ResponseWriter.Write(b)
}

// replacedWriter answers 204 where the handler says 201.
type replacedWriter struct {
	http.ResponseWriter
	noBody bool
}

func (w *replacedWriter) WriteHeader(code int) {
	if code == http.StatusCreated {
		code, w.noBody = http.StatusNoContent, true
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write drops the status text the handler writes after 201: 204 has no body.
func (w *replacedWriter) Write(p []byte) (int, error) {
	if w.noBody {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// badDestination reports a Destination whose path, once decoded, has a
// ".." segment (or that is no URL at all).
func badDestination(d string) bool {
	if d == "" {
		return false
	}
	if hasDotDot(d) {
		return true
	}
	u, err := url.Parse(d)
	return err != nil || hasDotDot(u.Path)
}

// hasDotDot reports a ".." path segment, which a client never needs:
// such a request is refused rather than cleaned into another path.
func hasDotDot(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return true
		}
	}
	return false
}

// Metrics is the registry this server reports to.
func (s *Server) Metrics() *metrics.Registry { return s.metrics }

// closeUnread closes the connection after an answer given before the
// request's body was read to its end (a 401, a 423 Locked, a 409 for a
// missing parent, a refused path). Else net/http, to keep the connection
// for another request, would read the rest of a small body first, before
// it sent the answer: a client that waits for "100 Continue" before it
// sends its body (litmus; curl for a while) got no answer at all.
func closeUnread(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		b := &countedBody{ReadCloser: r.Body, want: r.ContentLength}
		r.Body = b
		next.ServeHTTP(&closeUnreadWriter{ResponseWriter: w, body: b}, r)
	})
}

// countedBody counts a request body as the handler reads it: whether it
// was read to its end, and the read error, if any.
type countedBody struct {
	io.ReadCloser
	want, n int64 // want: Content-Length, -1 unknown (chunked)
	eof     bool
	err     error
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	switch {
	case err == io.EOF:
		b.eof = true
	case err != nil:
		b.err = err
	}
	return n, err
}

// done reports whether the body was read to its end.
func (b *countedBody) done() bool { return b.eof || (b.want >= 0 && b.n >= b.want) }

// smallRest reports whether net/http would read what is left of the body
// before answering (its limit is 256 KiB, or an unknown length): a larger
// rest it leaves, and closes the connection gracefully by itself, which
// a Connection: close of ours would turn into a reset before the client
// read the answer.
func (b *countedBody) smallRest() bool { return b.want < 0 || b.want-b.n <= 256<<10 }

// incomplete is the error of a body that did not arrive whole.
func (b *countedBody) incomplete() error {
	switch {
	case b.err != nil:
		return fmt.Errorf("upload failed: %w", b.err)
	case b.want >= 0 && b.n != b.want:
		return fmt.Errorf("upload ended after %d of %d bytes", b.n, b.want)
	}
	return nil
}

type closeUnreadWriter struct {
	http.ResponseWriter
	body  *countedBody
	wrote bool
}

func (w *closeUnreadWriter) WriteHeader(code int) {
	if !w.wrote && code >= 200 {
		w.wrote = true
		if !w.body.done() && w.body.smallRest() {
			w.Header().Set("Connection", "close")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *closeUnreadWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *closeUnreadWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
