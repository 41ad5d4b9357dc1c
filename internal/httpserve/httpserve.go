// Package httpserve is the HTTP server every Kelp service runs: net/http
// with the timeouts Kelp uses and a shutdown that does not wait for idle
// clients.
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
	"log/slog"
	"net"
	"net/http"
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
// TLS handshakes) go to log at debug level.
func New(h http.Handler, log *slog.Logger) *Server {
	s := &Server{fresh: map[net.Conn]bool{}}
	s.Server = &http.Server{
		Handler:           h,
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
