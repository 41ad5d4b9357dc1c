package volumeserver

// The fast read path. Most requests a volume server answers are a plain
// "GET /<fid>" of a small needle, and for those net/http's machinery cost
// more CPU than the read itself: a header map, a request and a response
// object, a background read goroutine per request (an extra read syscall
// and two goroutine wake-ups) and the deadlines around it. fastListener sits
// between the TCP listener and the http.Server: it reads each connection's
// requests itself and answers the plain reads of small needles directly,
// with one positioned read and one write. At the first request it does not
// take (another method, a query, a Range or conditional header, an
// Authorization header, any header it does not know, a head that is not
// strict CRLF lines of printable bytes, a large needle, an error to report,
// a request that does not fit its buffer or that broke off), it hands the
// connection, with the bytes it read still unconsumed, to net/http, which
// then serves it, that request included, until it has answered a plain GET
// whole (httpfast.Reclaim). So every answer but the plain small read is net/http's
// own, and that one is the same bytes net/http would send
// (TestFastReadDifferential, FuzzFastReadHead). The rule for what it takes
// is a subset on which every HTTP/1.1 reader agrees where the request ends:
// a second parser must never split a byte stream differently from net/http
// or from a proxy in front (request smuggling).
//
// It is off when reads need a token (Config.ReadSigner, Server.fastReadOn).
// Under TLS it reads the TLS connection (httpfast.Listener makes the
// handshake), and a connection it hands over keeps its TLS state for the
// handler (httpserve's connection context).

import (
	"bufio"
	"bytes"
	"mime"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/httpfast"
	"github.com/kelpfs/kelp/internal/metrics"
)

const (
	// fastReadBuf is the per-connection read buffer: a request whose
	// headers do not fit is handed to net/http.
	fastReadBuf = 4096
	// fastIdle is how long a connection may sit between requests (net/http's
	// IdleTimeout in httpserve), and fastHeader how long one request's
	// headers may take to arrive (its ReadHeaderTimeout).
	fastIdle   = 2 * time.Minute
	fastHeader = 30 * time.Second
	// fastCopyMax: bodies up to this size are copied after the headers into
	// one buffer; larger ones are sent with writev, uncopied.
	fastCopyMax = 16 << 10
	// fastCloseGrace bounds the write of an answer under way when the
	// listener closes.
	fastCloseGrace = 5 * time.Second
)

// fastListener is the fast path's listener (httpfast.Listener: the accept
// loop, the hand-over to net/http, Close) with its request loop.
type fastListener struct {
	*httpfast.Listener
	s   *Server
	rec *metrics.OpRecorder

	served atomic.Int64 // requests answered here (for tests)
	wrote  atomic.Int64 // of which uploads (fastwrite.go)
	handed atomic.Int64 // connections handed to net/http (for tests)
	// writing counts the uploads being written (fastwrite.go).
	writing sync.WaitGroup
	writes  bool // uploads may take the fast path (Server.fastWriteOn)

	// idle and header are fastIdle and fastHeader (tests shorten them).
	idle, header atomic.Int64
}

func newFastListener(ln net.Listener, s *Server) *fastListener {
	l := &fastListener{s: s, rec: s.metrics.HTTPOp("volume", "read", http.StatusOK)}
	l.Listener = httpfast.NewListener(ln, fastCloseGrace, s.log, l.serve)
	l.writes = s.fastWriteOn()
	l.idle.Store(int64(fastIdle))
	l.header.Store(int64(fastHeader))
	return l
}

// errNotFast: the request is for net/http.
var errNotFast = httpfast.ErrNotFast

func (l *fastListener) serve(pc *httpfast.PrefixConn) {
	c := pc.Conn
	if !l.MarkBusy(c, false, nil) {
		c.Close()
		return
	}
	handed := false
	defer func() {
		if v := recover(); v != nil {
			l.s.log.Error("volumeserver: fast read panicked", "panic", v)
		}
		if !handed {
			l.Forget(c)
			c.Close()
		}
	}()
	br := bufio.NewReaderSize(pc, fastReadBuf)
	var out []byte
	var remote string // c's remote address, once a write needs it
	st := pc.TLSState()
	dl := httpfast.NewDeadlines(c, &l.idle, &l.header)
	for {
		if dl.AwaitRequest(br) != nil {
			return // closed, idle too long, or the listener closed it
		}
		head, err := peekHead(br, dl.BeforeRead)
		if err == nil && head[0] == 'P' { // PUT or POST (fastMethod): fastwrite.go
			var done bool
			if done, err = l.serveWrite(pc, st, br, head, &out, &remote, dl.BeforeRead); done {
				return
			}
			if err == nil {
				continue
			}
		}
		if err == nil {
			start := time.Now()
			var body []byte
			var n int64
			if out, body, n, err = l.s.fastRead(head, out); err == nil {
				if !l.MarkBusy(c, true, nil) {
					return
				}
				l.rec.Start()
				br.Discard(len(head))
				// Counted before the answer goes out, so that a client
				// that has read it finds it counted.
				l.served.Add(1)
				if body != nil {
					bufs := net.Buffers{out, body}
					_, err = bufs.WriteTo(c)
				} else {
					_, err = c.Write(out)
				}
				l.rec.Done(time.Since(start), n)
				if err != nil || !l.MarkBusy(c, false, nil) {
					return
				}
				if cap(out) > 2*fastCopyMax {
					out = nil
				}
				continue
			}
		}
		// A request that is not a fast read, and one whose head broke off,
		// go to net/http with what arrived (see HandOver).
		if l.HandOver(pc, br, err) {
			handed = true
			l.handed.Add(1)
		}
		return
	}
}

// peekHead returns the request's head (request line and headers, through the
// blank line) from br without consuming it. errNotFast: it is not a GET,
// HEAD, PUT or POST, its head does not fit the buffer, or it has a byte net/http might
// read differently (see httpfast.HeadEnd). beforeRead is called before each read
// from the connection the head needs.
func peekHead(br *bufio.Reader, beforeRead func()) ([]byte, error) {
	return httpfast.PeekHead(br, fastMethod, beforeRead)
}

// fastMethod reports whether b, the first bytes of a request, may begin
// "GET ", "HEAD ", "PUT " or "POST ".
func fastMethod(b []byte) bool {
	return httpfast.PrefixOf(b, "GET ") || httpfast.PrefixOf(b, "HEAD ") || httpfast.PrefixOf(b, "PUT ") || httpfast.PrefixOf(b, "POST ")
}

// parseFastGet parses a head peekHead returned. ok only for "GET /path
// HTTP/1.1" or HEAD with a plain path (no query, no escapes) and headers
// among Host (required), User-Agent, Accept, Accept-Encoding and
// Connection: keep-alive.
func parseFastGet(head []byte) (path []byte, isHead, ok bool) {
	line, rest, _ := bytes.Cut(head, []byte("\r\n"))
	switch {
	case bytes.HasPrefix(line, []byte("GET ")):
		line = line[4:]
	case bytes.HasPrefix(line, []byte("HEAD ")):
		line, isHead = line[5:], true
	default:
		return nil, false, false
	}
	path, proto, found := bytes.Cut(line, []byte(" "))
	if !found || string(proto) != "HTTP/1.1" || len(path) < 2 || path[0] != '/' {
		return nil, false, false
	}
	for _, ch := range path[1:] {
		if !isFidChar(ch) {
			return nil, false, false
		}
	}
	host := false
	for len(rest) > 0 {
		var h []byte
		h, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		if len(h) == 0 {
			break
		}
		name, value, found := bytes.Cut(h, []byte(":"))
		if !found {
			return nil, false, false
		}
		value = bytes.TrimLeft(bytes.TrimRight(value, " \t"), " \t")
		switch {
		case asciiEqualFold(name, "host"):
			if host || len(value) == 0 {
				return nil, false, false
			}
			for _, ch := range value {
				if !isHostChar(ch) {
					return nil, false, false
				}
			}
			host = true
		case asciiEqualFold(name, "user-agent"), asciiEqualFold(name, "accept"), asciiEqualFold(name, "accept-encoding"):
		case asciiEqualFold(name, "connection"):
			if !asciiEqualFold(value, "keep-alive") {
				return nil, false, false
			}
		default:
			return nil, false, false
		}
	}
	return path, isHead, host
}

func isFidChar(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == ',' || c == '_' || c == '-' || c == '.'
}

func isHostChar(c byte) bool {
	return isFidChar(c) && c != ',' || c == ':' || c == '[' || c == ']'
}

func asciiEqualFold(b []byte, lower string) bool {
	return httpfast.EqualFold(b, lower)
}

// fastRead answers head into out (reset first) when it is a plain read of a
// small needle of a normal volume on this server; errNotFast otherwise. A
// body of at most fastCopyMax is appended to out, a larger one returned
// apart (to be sent with writev, uncopied); n is the body bytes to send. The
// headers are handleRead's for the same request.
func (s *Server) fastRead(head, out []byte) (_ []byte, body []byte, n int64, err error) {
	path, isHead, ok := parseFastGet(head)
	if !ok {
		return out, nil, 0, errNotFast
	}
	id, err := fid.Parse(string(path[1:]))
	if err != nil {
		return out, nil, 0, errNotFast
	}
	v, ok := s.store.Volume(id.Volume)
	if !ok {
		return out, nil, 0, errNotFast
	}
	obj, err := v.Read(id.Key, id.Cookie)
	if err != nil {
		return out, nil, 0, errNotFast // net/http reads again and reports it
	}
	defer obj.Close()
	data := obj.Bytes()
	if data == nil {
		return out, nil, 0, errNotFast
	}
	ctype := obj.Meta.Mime
	if ctype == "" {
		ctype = mime.TypeByExtension(filepath.Ext(obj.Meta.Name))
	}
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	var disposition string
	if obj.Meta.Name != "" {
		disposition = mime.FormatMediaType("inline", map[string]string{"filename": obj.Meta.Name})
		if disposition == "" || !headerSafe(disposition) { // "": handleRead sends it empty
			return out, nil, 0, errNotFast
		}
	}
	if !headerSafe(ctype) {
		return out, nil, 0, errNotFast
	}
	out = append(out[:0], "HTTP/1.1 200 OK\r\nAccept-Ranges: bytes\r\n"...)
	if disposition != "" {
		out = append(append(append(out, "Content-Disposition: "...), disposition...), "\r\n"...)
	}
	out = append(out, "Content-Length: "...)
	out = strconv.AppendInt(out, int64(len(data)), 10)
	out = append(append(append(out, "\r\nContent-Type: "...), ctype...), "\r\nEtag: \""...)
	out = append(append(out, obj.ETag...), "\"\r\nLast-Modified: "...)
	out = obj.ModTime.UTC().AppendFormat(out, http.TimeFormat)
	// net/http sends the handler's headers sorted, then its Date.
	out = append(append(append(out, "\r\nDate: "...), httpDate()...), "\r\n\r\n"...)
	switch {
	case isHead:
		return out, nil, 0, nil
	case len(data) > fastCopyMax:
		return out, data, int64(len(data)), nil
	}
	return append(out, data...), nil, int64(len(data)), nil
}

// headerSafe: no control characters (net/http would rewrite them).
func headerSafe(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < ' ' || v[i] == 0x7f {
			return false
		}
	}
	return true
}

// httpDate is the Date header's value, formatted once a second.
func httpDate() []byte { return httpfast.Date() }
