package httpfast

import (
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Listener sits between a TCP listener (or a TLS one over TCP) and an
// http.Server. Each accepted TCP connection goes to Serve in a goroutine of
// its own, a TLS one once its handshake is done there (serveTLS); what
// Serve hands over (Give), and any other connection, is what the
// http.Server's Accept returns. It keeps the connections Serve holds, idle
// or answering (MarkBusy, Forget), so that Close can end them: an idle one
// at once, one answering once its answer is written, within Grace.
type Listener struct {
	net.Listener
	serve func(*PrefixConn)
	grace time.Duration
	log   *slog.Logger // accept errors; nil: none

	handoff chan net.Conn
	done    chan struct{}
	once    sync.Once
	started sync.Once // the accept loop, from the first Accept on

	mu     sync.Mutex
	closed bool
	live   map[net.Conn]bool // the connections Serve holds; true while answering
}

// NewListener returns a Listener over ln whose TCP connections go to serve.
func NewListener(ln net.Listener, grace time.Duration, log *slog.Logger, serve func(*PrefixConn)) *Listener {
	return &Listener{Listener: ln, serve: serve, grace: grace, log: log,
		handoff: make(chan net.Conn), done: make(chan struct{}), live: map[net.Conn]bool{}}
}

// Accept returns the next connection for net/http.
func (l *Listener) Accept() (net.Conn, error) {
	l.started.Do(func() { go l.acceptLoop() })
	select {
	case c := <-l.handoff:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting and closes the idle connections Serve holds; one
// being answered closes once its answer is written: it gets the grace a
// request in net/http's hands gets (httpserve's Stop), not forever, since a
// client that stopped reading would otherwise hold it open past the
// server's end.
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		err = l.Listener.Close()
		l.mu.Lock()
		l.closed = true
		for c, busy := range l.live {
			if busy {
				c.SetWriteDeadline(time.Now().Add(l.grace))
			} else {
				c.Close()
			}
		}
		l.mu.Unlock()
	})
	return err
}

func (l *Listener) acceptLoop() {
	backoff := 5 * time.Millisecond
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			select {
			case <-l.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				l.Close()
				return
			}
			// EMFILE and the like: retry, as net/http does.
			if l.log != nil {
				l.log.Debug("httpfast: accept", "err", err)
			}
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-l.done:
				t.Stop()
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		switch c := c.(type) {
		case *net.TCPConn:
			go l.serve(&PrefixConn{Conn: c})
		case *tls.Conn:
			go l.serveTLS(c)
		default:
			l.Give(c)
		}
	}
}

// handshakeTimeout bounds a TLS handshake, as net/http bounds it: by its
// ReadHeaderTimeout (httpserve's).
const handshakeTimeout = 30 * time.Second

// serveTLS makes the TLS handshake of c, then gives c to Serve; one that
// agreed on another protocol than HTTP/1.1 (ALPN) goes to net/http as it is.
func (l *Listener) serveTLS(c *tls.Conn) {
	if !l.MarkBusy(c, false, nil) { // idle: Close ends the handshake
		c.Close()
		return
	}
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	err := c.Handshake()
	c.SetDeadline(time.Time{})
	if err != nil {
		l.Forget(c)
		refusePlainHTTP(err)
		c.Close()
		if l.log != nil {
			l.log.Debug("httpfast: TLS handshake", "remote", c.RemoteAddr().String(), "err", err)
		}
		return
	}
	if p := c.ConnectionState().NegotiatedProtocol; p != "" && p != "http/1.1" {
		l.Forget(c)
		l.Give(c)
		return
	}
	l.serve(&PrefixConn{Conn: c})
}

// refusePlainHTTP answers a plain HTTP request sent to the TLS port with
// a 400 that says so, as net/http's server does, instead of silence.
func refusePlainHTTP(err error) {
	var re tls.RecordHeaderError
	if !errors.As(err, &re) || re.Conn == nil {
		return
	}
	switch string(re.RecordHeader[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO", "DELET", "PATCH", "CONNE", "TRACE":
		io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
	}
}

// Give hands c to net/http (closed instead once the listener is).
func (l *Listener) Give(c net.Conn) {
	select {
	case l.handoff <- c:
	case <-l.done:
		c.Close()
	}
}

// MarkBusy marks c, which Serve holds, answering (busy) or idle; when busy
// and inflight is not nil, it also counts the answer there, under the same
// lock as the check that the listener is open (so that a wait on inflight
// after Close sees every answer that started). false means the listener
// closed and c must be closed.
func (l *Listener) MarkBusy(c net.Conn, busy bool, inflight *sync.WaitGroup) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.live[c] = busy
	if busy && inflight != nil {
		inflight.Add(1)
	}
	return true
}

// Forget drops c from the connections Serve holds (closed, or handed to
// net/http).
func (l *Listener) Forget(c net.Conn) {
	l.mu.Lock()
	delete(l.live, c)
	l.mu.Unlock()
}

// WaitAtMost waits for wg, but no longer than d.
func WaitAtMost(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
