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
	"io"
	"log/slog"
	"net"
	"net/http"
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
		Handler:           Recover(h, log),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		ConnState:         s.track,
	}
	return s
}

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
func Recover(h http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tw := &startWriter{ResponseWriter: w}
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
// and ReadFrom through (ReadFrom lets net/http send files with sendfile),
// and Unwrap lets http.ResponseController reach the rest.
type startWriter struct {
	http.ResponseWriter
	started bool
}

func (w *startWriter) WriteHeader(code int) {
	if code >= 200 { // 1xx answers are interim: the real one is still to come
		w.started = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *startWriter) Write(p []byte) (int, error) {
	w.started = true
	return w.ResponseWriter.Write(p)
}

func (w *startWriter) ReadFrom(r io.Reader) (int64, error) {
	w.started = true
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(w.ResponseWriter, r)
}

func (w *startWriter) Flush() {
	w.started = true
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *startWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
