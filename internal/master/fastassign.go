package master

// The fast assign path. A 1 KiB write costs the cluster one GET
// /dir/assign on the master and one upload on a volume server, and the
// master's net/http machinery (a header map, a request and a response
// object, a context with its cancel, the deadlines, a background read
// goroutine and its wake-ups) cost it more CPU than the assign itself.
// assignListener sits between the TCP listener and the http.Server: it
// reads each connection's requests and serves the plain assigns itself, with
// the very handler net/http serves (Server.httpSrv.Handler: recovery,
// metrics, routes, onLeader, handleAssign), an http.Request built from the
// parsed head and a ResponseWriter that frames the answer as net/http does
// (httpfast.Answer). At the first request it does not take it hands the
// connection, with the bytes it read, to net/http, which takes it back
// after the next assign it answers whole (httpfast.Reclaim): clients keep
// one pool of connections for assigns and lookups alike.
//
// It takes "GET /dir/assign" with an optional query of plain bytes
// (letters, digits, "-._~=&%+,"), HTTP/1.1, a head of strict CRLF lines
// (httpfast.HeadEnd: every HTTP/1.1 reader agrees where it ends), one Host
// at most one Authorization (checked by the handler chain's access
// middleware, Config.Access, as under net/http), and otherwise only
// User-Agent, Accept, Accept-Encoding and "Connection: keep-alive" (no
// body, no forwarding mark), and only while this master leads (a
// follower's forwarding stays net/http's). Under TLS it reads the TLS
// connection (httpfast.Listener makes the handshake) and the request
// carries the connection's TLS state: a client certificate is an identity
// to the access middleware. It is off with Config.NoFastAssign.
// TestFastAssignDifferential, FuzzFastAssignHead.

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kelpfs/kelp/internal/httpfast"
)

const (
	// fastAssignBuf is the per-connection read buffer: a request whose
	// head does not fit is net/http's.
	fastAssignBuf = 4096
	// fastAssignIdle and fastAssignHeader are httpserve's IdleTimeout and
	// ReadHeaderTimeout.
	fastAssignIdle   = 2 * time.Minute
	fastAssignHeader = 30 * time.Second
	// fastAssignGrace bounds the write of an answer under way when the
	// listener closes, and Close's wait for the assigns in progress.
	fastAssignGrace = 2 * time.Second
)

// fastAssignOn reports whether plain assigns are served outside net/http.
func (s *Server) fastAssignOn() bool {
	return !s.cfg.NoFastAssign
}

// assignListener is the fast path's listener (httpfast.Listener: the
// accept loop, the hand-over to net/http, Close) with its request loop.
type assignListener struct {
	*httpfast.Listener
	s      *Server
	ctx    context.Context // of the requests served here; cancelled by wait
	cancel context.CancelFunc

	serving sync.WaitGroup // the assigns in progress

	served atomic.Int64 // requests answered here (for tests)
	handed atomic.Int64 // connections handed to net/http (for tests)

	idle, header atomic.Int64 // fastAssignIdle and fastAssignHeader (tests shorten them)
}

func newAssignListener(ln net.Listener, s *Server) *assignListener {
	l := &assignListener{s: s}
	l.Listener = httpfast.NewListener(ln, fastAssignGrace, nil, l.serve)
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.idle.Store(int64(fastAssignIdle))
	l.header.Store(int64(fastAssignHeader))
	return l
}

// wait waits, at most fastAssignGrace, for the assigns in progress, then
// cancels what is left; called after Close, when no more can start.
func (l *assignListener) wait() {
	httpfast.WaitAtMost(&l.serving, fastAssignGrace)
	l.cancel()
}

func assignMethod(b []byte) bool { return httpfast.PrefixOf(b, "GET /dir/assign") }

func (l *assignListener) serve(pc *httpfast.PrefixConn) {
	c := pc.Conn
	if !l.MarkBusy(c, false, nil) {
		c.Close()
		return
	}
	handed := false
	defer func() {
		if v := recover(); v != nil {
			l.s.log.Error("master: fast assign panicked", "panic", v)
		}
		if !handed {
			l.Forget(c)
			c.Close()
		}
	}()
	br := bufio.NewReaderSize(pc, fastAssignBuf)
	var out []byte
	var remote string
	st := pc.TLSState() // nil without TLS
	dl := httpfast.NewDeadlines(c, &l.idle, &l.header)
	for {
		if dl.AwaitRequest(br) != nil {
			return
		}
		head, err := httpfast.PeekHead(br, assignMethod, dl.BeforeRead)
		var req *http.Request
		if err == nil {
			if req, err = parseAssign(head); err == nil && !l.s.cons.IsLeader() {
				err = httpfast.ErrNotFast
			}
		}
		if err == nil {
			if !l.MarkBusy(c, true, &l.serving) {
				return
			}
			if remote == "" {
				remote = c.RemoteAddr().String()
			}
			req.RemoteAddr, req.TLS = remote, st
			a := httpfast.NewAnswer()
			func() {
				defer l.serving.Done() // also when the handler aborts (a panic serve recovers)
				l.s.httpSrv.Handler.ServeHTTP(a, req.WithContext(l.ctx))
			}()
			var closeAfter bool
			out, closeAfter, err = a.Frame(out[:0])
			br.Discard(len(head))
			if err != nil {
				// Not an answer framed here: a bug (TestFastAssignDifferential).
				// Cut the connection rather than send what net/http would not.
				l.s.log.Error("master: fast assign: answer not framed")
				return
			}
			l.served.Add(1) // before the answer leaves: a test that read it finds it counted
			_, err = c.Write(out)
			if cap(out) > 16<<10 {
				out = nil
			}
			if err != nil || closeAfter || !l.MarkBusy(c, false, nil) {
				return
			}
			continue
		}
		// Not an assign taken here, or a head that broke off: net/http's,
		// with what arrived (see HandOver).
		if l.HandOver(pc, br, err) {
			handed = true
			l.handed.Add(1)
		}
		return
	}
}

// parseAssign returns the request of a head PeekHead returned when it is
// one the fast path takes (see the top of the file), as net/http's server
// reads it (FuzzFastAssignHead); httpfast.ErrNotFast otherwise. The
// context and RemoteAddr are the caller's to set.
func parseAssign(head []byte) (*http.Request, error) {
	line, rest, _ := bytes.Cut(head, []byte("\r\n"))
	target, proto, found := bytes.Cut(line[len("GET "):], []byte(" "))
	if !found || string(proto) != "HTTP/1.1" || !bytes.HasPrefix(target, []byte("/dir/assign")) {
		return nil, httpfast.ErrNotFast
	}
	if q := target[len("/dir/assign"):]; len(q) > 0 {
		if q[0] != '?' {
			return nil, httpfast.ErrNotFast
		}
		for _, c := range q[1:] {
			if !queryChar(c) {
				return nil, httpfast.ErrNotFast
			}
		}
	}
	// What net/http does with the target (url.ParseRequestURI), for the
	// same URL (RawQuery, ForceQuery).
	u, err := url.ParseRequestURI(string(target))
	if err != nil || u.Path != "/dir/assign" {
		return nil, httpfast.ErrNotFast
	}
	h := make(http.Header, 4)
	var host string
	for len(rest) > 0 {
		var hl []byte
		hl, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		if len(hl) == 0 {
			break
		}
		name, value, found := bytes.Cut(hl, []byte(":"))
		if !found {
			return nil, httpfast.ErrNotFast
		}
		value = bytes.Trim(value, " \t")
		switch {
		case httpfast.EqualFold(name, "host"):
			if host != "" || len(value) == 0 {
				return nil, httpfast.ErrNotFast
			}
			for _, c := range value {
				if !httpfast.HostChar(c) {
					return nil, httpfast.ErrNotFast
				}
			}
			host = string(value)
		case httpfast.EqualFold(name, "authorization"):
			if h["Authorization"] != nil {
				return nil, httpfast.ErrNotFast
			}
			h["Authorization"] = []string{string(value)}
		case httpfast.EqualFold(name, "user-agent"):
			h["User-Agent"] = append(h["User-Agent"], string(value))
		case httpfast.EqualFold(name, "accept"):
			h["Accept"] = append(h["Accept"], string(value))
		case httpfast.EqualFold(name, "accept-encoding"):
			h["Accept-Encoding"] = append(h["Accept-Encoding"], string(value))
		case httpfast.EqualFold(name, "connection"):
			if !httpfast.EqualFold(value, "keep-alive") {
				return nil, httpfast.ErrNotFast
			}
			h["Connection"] = append(h["Connection"], string(value))
		default:
			return nil, httpfast.ErrNotFast
		}
	}
	if host == "" {
		return nil, httpfast.ErrNotFast
	}
	return &http.Request{
		Method: http.MethodGet, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: http.NoBody, Host: host, RequestURI: string(target),
	}, nil
}

// queryChar: a byte of an assign query the fast path takes.
func queryChar(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' ||
		c == '-' || c == '.' || c == '_' || c == '~' || c == '=' || c == '&' || c == '%' || c == '+' || c == ','
}
