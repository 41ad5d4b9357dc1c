// Package httpserve is the HTTP server every Kelp service runs: net/http
// with the timeouts Kelp uses, handler panics answered and logged, and a
// shutdown that does not wait for idle clients.
//
// http.Server.Shutdown waits for every connection to go idle, and counts a
// connection that has not sent its first request as busy for up to five
// seconds. HTTP clients (Go's transport among them) open such spare
// connections, so without help a server with clients took five seconds to
// stop. Server tracks those connections and closes them first: they have no
// request to finish.
package httpserve

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"sync"
	"time"
)

// Server is an http.Server that shuts down promptly.
type Server struct {
	*http.Server

	mu    sync.Mutex
	fresh map[net.Conn]bool // connections that have not sent a request yet
}

// New returns a server for h. Errors of the HTTP machinery (bad requests,
// TLS handshakes) go to log at debug level; a panic in h is logged at error
// level and answered with 500 (see Recover).
func New(h http.Handler, log *slog.Logger) *Server {
	s := &Server{fresh: map[net.Conn]bool{}}
	s.Server = &http.Server{
		Handler:           recoverFor(h, log, s),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		ConnState:         s.track,
		ConnContext:       s.connContext,
	}
	return s
}

// Gatherer is what a TLS listener puts under its connections
// (internal/security): between Gather and Release, the TLS records of a
// write leave in a few large writes instead of one write each.
type Gatherer interface {
	Gather()
	Release() error
}

// connInfo is what a request's context tells of the connection it came
// on: the server that accepted it, and the Gatherer under it (TLS).
type connInfo struct {
	srv *Server
	g   Gatherer
	// tls is the TLS state of a connection a fast path (internal/httpfast)
	// handshook and handed over: net/http sees no *tls.Conn there and
	// leaves Request.TLS nil, which recoverFor fills in.
	tls *tls.ConnectionState
}

type connKey struct{}

// tlsCarrier is a connection that reads a TLS one (httpfast.PrefixConn).
type tlsCarrier interface{ TLSConn() *tls.Conn }

func (s *Server) connContext(ctx context.Context, c net.Conn) context.Context {
	ci := &connInfo{srv: s}
	tc, ok := c.(*tls.Conn)
	if tcr, carries := c.(tlsCarrier); !ok && carries {
		if tc = tcr.TLSConn(); tc != nil {
			st := tc.ConnectionState()
			ci.tls = &st
		}
	}
	if tc != nil {
		ci.g, _ = tc.NetConn().(Gatherer)
	}
	return context.WithValue(ctx, connKey{}, ci)
}

// ownConn is the connection info of a request that s's own listener
// accepted, nil for one handed to the handler otherwise. A request served
// in process (client.Loopback) carries the context of the request it was
// made for, with another server's connection in it: its writes go to a
// pipe, and ReadFrom must reach the pipe's (which reads straight into the
// caller's buffer).
func ownConn(r *http.Request, s *Server) *connInfo {
	if s == nil {
		return nil
	}
	if ci, ok := r.Context().Value(connKey{}).(*connInfo); ok && ci.srv == s {
		return ci
	}
	return nil
}

// gatherMin is the smallest write that is gathered: a smaller one fits
// in a TLS record or two.
const gatherMin = 32 << 10

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

func (s *Server) track(c net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st == http.StateNew {
		s.fresh[c] = true
	} else {
		delete(s.fresh, c)
	}
}

// Stop is Shutdown with requests in progress given grace to finish, the
// way every service stops.
func (s *Server) Stop(grace time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	return s.Shutdown(ctx)
}

// Shutdown stops accepting, closes the connections that never sent a
// request, waits for requests in progress until ctx ends, and then closes
// what is left.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	for c := range s.fresh {
		c.Close()
	}
	s.mu.Unlock()
	err := s.Server.Shutdown(ctx)
	if err != nil {
		s.Server.Close()
	}
	return err
}

// Recover runs h and turns a panic in it into a logged 500: a bug in one
// handler is then a visible error that a client and the tests see, not a
// connection closed without an answer (net/http's own recovery, which logs
// the panic only on the server's debug-level error log). If the response
// had begun, the status line is gone and a 500 cannot follow: the
// connection is cut instead, so that the client sees a failed transfer
// rather than a short body it could take for whole. http.ErrAbortHandler
// keeps its meaning: a handler that aborts on purpose is no crash and is
// not logged.
func Recover(h http.Handler, log *slog.Logger) http.Handler { return recoverFor(h, log, nil) }

// recoverFor is Recover for the handler of s: a request on s's own
// connection gets its writes gathered (TLS) and large ReadFrom copies.
func recoverFor(h http.Handler, log *slog.Logger, s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tw := &startWriter{ResponseWriter: w}
		if ci := ownConn(r, s); ci != nil {
			if r.TLS == nil && ci.tls != nil {
				r2 := *r // a shallow copy, as Request.WithContext makes
				r2.TLS = ci.tls
				r = &r2
			}
			tw.conn = true
			// Only HTTP/1: its handler writes reach the connection before
			// they return. Under HTTP/2 a writer goroutine frames them, and
			// frames held while the handler waits for a window update
			// would never leave.
			if r.ProtoMajor == 1 {
				tw.g = ci.g
			}
		}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			log.Error("http: handler panicked", "method", r.Method, "path", r.URL.Path, "panic", v,
				"stack", string(debug.Stack()))
			if tw.started {
				panic(http.ErrAbortHandler)
			}
			w.Header().Set("Connection", "close") // the request body may be half read
			http.Error(w, "internal server error", http.StatusInternalServerError)
		}()
		h.ServeHTTP(tw, r)
	})
}

// startWriter remembers whether the response has begun. It passes Flush
// through, and ReadFrom when net/http can send the source with sendfile or
// splice; Unwrap lets http.ResponseController reach the rest. Over TLS (g
// set) it gathers the records of each large write into few socket writes.
// ReadFrom of any other source (and of every source over TLS) copies
// through a 256 KiB buffer: net/http's own copy takes 32 KiB at a time.
// Both only for a response to s's own connection (conn): a handler served
// in process by client.Loopback keeps the pipe's own ReadFrom.
type startWriter struct {
	http.ResponseWriter
	started bool
	conn    bool     // the response goes to net/http's connection
	g       Gatherer // under that connection (TLS), or nil
}

func (w *startWriter) WriteHeader(code int) {
	if code >= 200 { // 1xx answers are interim: the real one is still to come
		w.started = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *startWriter) Write(p []byte) (int, error) {
	w.started = true
	if w.g == nil || len(p) < gatherMin {
		return w.ResponseWriter.Write(p)
	}
	// Everything this write sends reaches the connection before it
	// returns (net/http's buffers take only what is smaller than them),
	// so Release leaves nothing behind.
	w.g.Gather()
	n, err := w.ResponseWriter.Write(p)
	if rerr := w.g.Release(); err == nil && rerr != nil {
		err = rerr
	}
	return n, err
}

func (w *startWriter) ReadFrom(r io.Reader) (int64, error) {
	w.started = true
	if w.g != nil || w.conn && !kernelCopies(r) {
		bp := copyBufs.Get().(*[]byte)
		defer copyBufs.Put(bp)
		return io.CopyBuffer(writeOnly{w}, r, *bp)
	}
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(w.ResponseWriter, r)
}

// kernelCopies reports whether net/http's ReadFrom sends what r reads
// without reading it into memory (sendfile from a file, splice from a
// socket). Any other reader it copies through a 32 KiB buffer, one read
// and one socket write per 32 KiB (a volume server's needle: 32 of each for
// 1 MiB); startWriter.ReadFrom copies those through 256 KiB instead.
func kernelCopies(r io.Reader) bool {
	if lr, ok := r.(*io.LimitedReader); ok {
		r = lr.R
	}
	switch r.(type) {
	case *os.File, *net.TCPConn, *net.UnixConn:
		return true
	}
	return false
}

// writeOnly hides ReadFrom, so that io.CopyBuffer writes from its buffer.
type writeOnly struct{ w io.Writer }

func (o writeOnly) Write(p []byte) (int, error) { return o.w.Write(p) }

func (w *startWriter) Flush() {
	w.started = true
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *startWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
