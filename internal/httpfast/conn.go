package httpfast

import (
	"bufio"
	"errors"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// Deadlines moves a fast-path connection's read deadline only when it
// matters, since each move costs a timer update: before waiting for a
// request, to the idle limit from now (again only once the last setting
// is a second old: the limit is minutes, give or take a second), and, when
// a head has not arrived whole, to the header limit from its first byte
// before reading the rest of it. A head that is already buffered needs no
// read. The limits are net/http's IdleTimeout and ReadHeaderTimeout in
// httpserve, read at each use (tests shorten them).
type Deadlines struct {
	c            net.Conn
	idle, header *atomic.Int64
	idleSet      time.Time // when the idle deadline was set; zero: another deadline is on
	headerSet    bool      // the current request's header deadline is on
}

// NewDeadlines returns the deadlines of c with limits idle and header (in
// nanoseconds).
func NewDeadlines(c net.Conn, idle, header *atomic.Int64) *Deadlines {
	return &Deadlines{c: c, idle: idle, header: header}
}

// AwaitRequest waits until br holds the first byte of the next request,
// under the idle limit. Its error means the connection is done: closed,
// idle too long, or closed by the listener.
func (d *Deadlines) AwaitRequest(br *bufio.Reader) error {
	// Each request's head gets the header limit from its first byte (in
	// practice from now: it starts in the buffer), also when it was
	// already buffered (pipelined) behind the last one.
	d.headerSet = false
	if br.Buffered() > 0 {
		return nil
	}
	if now := time.Now(); now.Sub(d.idleSet) > time.Second {
		d.c.SetReadDeadline(now.Add(time.Duration(d.idle.Load())))
		d.idleSet = now
	}
	_, err := br.Peek(1)
	return err
}

// BeforeRead is PeekHead's beforeRead (and that of a request's reads after
// its head): the header limit, from the first read the request needs.
func (d *Deadlines) BeforeRead() {
	if !d.headerSet {
		d.c.SetReadDeadline(time.Now().Add(time.Duration(d.header.Load())))
		d.headerSet, d.idleSet = true, time.Time{}
	}
}

// HandOver gives pc to net/http, with the bytes br holds unread, when err
// (the fast path's reason to stop) says so: a request the fast path does
// not take (ErrNotFast), or a head that broke off (EOF, a reset) with
// bytes arrived, which net/http answers (400 to a truncated head, not
// silence). A head that took longer than the header limit is not handed
// over: the caller closes it, as net/http closes it. It reports whether
// pc went to net/http.
func (l *Listener) HandOver(pc *PrefixConn, br *bufio.Reader, err error) bool {
	if !errors.Is(err, ErrNotFast) && (errors.Is(err, os.ErrDeadlineExceeded) || br.Buffered() == 0) {
		return false
	}
	l.Forget(pc.Conn)
	pc.Conn.SetReadDeadline(time.Time{})
	b, _ := br.Peek(br.Buffered())
	l.Give(pc.Rest(b))
	return true
}
