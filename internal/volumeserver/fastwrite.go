package volumeserver

// The fast write path: plain small uploads ("PUT /<fid>" or POST, a
// Content-Length body that fits the connection's buffer), read by
// fastListener instead of net/http. net/http's per-request cost (reading
// the head into a header map, a context with its cancel, the deadlines, the
// background read goroutine and its wake-ups, a response object and its
// buffers) was about half the volume server's CPU per 1 KiB write.
//
// What it takes is a strict subset, on which every HTTP/1.1 reader agrees
// where the request ends (no request smuggling): the head peekHead accepts
// (strict CRLF lines of printable bytes), "PUT" or "POST", a file id path
// with no query but "?sync=unhurried", HTTP/1.1, exactly one Host and one Content-Length (digits
// only, no sign, no leading zero), at most one Content-Type (not multipart),
// at most one Authorization (the write's token, which the handler checks),
// and otherwise only User-Agent, Accept, Accept-Encoding and "Connection:
// keep-alive": no Transfer-Encoding, no Expect. And only for a volume this
// server holds that has one copy: a replicated write, whose forwarding and
// write policy are the handler's business, goes to net/http as it came.
// The whole body must have arrived before anything is done; a body that
// does not come (the client went, or it took longer than the head may
// take) goes to net/http with the bytes read, which then reads the rest or
// answers the short body as it always did.
//
// The request is then served by the very handler net/http serves
// (Server.Handler: recovery, metrics, authorize, routes, handleWrite), with
// an http.Request built from the parsed head and a ResponseWriter that
// writes the answer the way net/http writes it: the status line, the
// handler's headers sorted, Date, and the Content-Length and Content-Type
// net/http adds when the handler set none (TestFastWriteDifferential,
// FuzzFastWriteHead). The volume's write, its fsync and everything the
// handler does are unchanged; only the HTTP framing around it is not
// net/http's.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/url"

	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/httpfast"
)

// fastWriteReq is what parseFastWrite read from a head.
type fastWriteReq struct {
	method string // "PUT" or "POST"
	path   string
	query  string // "" or unhurriedQuery
	host   string
	n      int64 // Content-Length
	header http.Header
}

// parseFastWrite parses a head peekHead returned; ok only within the subset
// above (Content-Length at most maxBody).
func parseFastWrite(head []byte, maxBody int) (fastWriteReq, bool) {
	var r fastWriteReq
	line, rest, _ := bytes.Cut(head, []byte("\r\n"))
	switch {
	case bytes.HasPrefix(line, []byte("PUT ")):
		r.method, line = http.MethodPut, line[4:]
	case bytes.HasPrefix(line, []byte("POST ")):
		r.method, line = http.MethodPost, line[5:]
	default:
		return r, false
	}
	path, proto, found := bytes.Cut(line, []byte(" "))
	if !found || string(proto) != "HTTP/1.1" || len(path) < 2 || path[0] != '/' {
		return r, false
	}
	// The one query taken: the mount's uploads of closed files ask for it.
	if p, ok := bytes.CutSuffix(path, []byte("?"+unhurriedQuery)); ok {
		path, r.query = p, unhurriedQuery
	}
	for _, ch := range path[1:] {
		if !isFidChar(ch) {
			return r, false
		}
	}
	r.path = string(path)
	r.n = -1
	h := make(http.Header, 4)
	for len(rest) > 0 {
		var hl []byte
		hl, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		if len(hl) == 0 {
			break
		}
		name, value, found := bytes.Cut(hl, []byte(":"))
		if !found {
			return r, false
		}
		value = bytes.TrimLeft(bytes.TrimRight(value, " \t"), " \t")
		switch {
		case asciiEqualFold(name, "host"):
			if r.host != "" || len(value) == 0 {
				return r, false
			}
			for _, ch := range value {
				if !isHostChar(ch) {
					return r, false
				}
			}
			r.host = string(value)
		case asciiEqualFold(name, "content-length"):
			if r.n >= 0 || len(value) == 0 || len(value) > 9 || value[0] == '0' && len(value) > 1 {
				return r, false
			}
			n := int64(0)
			for _, ch := range value {
				if ch < '0' || ch > '9' {
					return r, false
				}
				n = n*10 + int64(ch-'0')
			}
			if n > int64(maxBody) {
				return r, false
			}
			r.n = n
			h["Content-Length"] = []string{string(value)}
		case asciiEqualFold(name, "content-type"):
			if h["Content-Type"] != nil || len(value) >= len("multipart") && asciiEqualFold(value[:len("multipart")], "multipart") {
				return r, false
			}
			h["Content-Type"] = []string{string(value)}
		case asciiEqualFold(name, "authorization"):
			if h["Authorization"] != nil {
				return r, false
			}
			h["Authorization"] = []string{string(value)}
		case asciiEqualFold(name, "user-agent"):
			h["User-Agent"] = append(h["User-Agent"], string(value))
		case asciiEqualFold(name, "accept"):
			h["Accept"] = append(h["Accept"], string(value))
		case asciiEqualFold(name, "accept-encoding"):
			h["Accept-Encoding"] = append(h["Accept-Encoding"], string(value))
		case asciiEqualFold(name, "connection"):
			if !asciiEqualFold(value, "keep-alive") {
				return r, false
			}
			h["Connection"] = append(h["Connection"], string(value))
		default:
			return r, false
		}
	}
	if r.host == "" || r.n < 0 {
		return r, false
	}
	r.header = h
	return r, true
}

// fastWriteTakes reports whether a write to path goes the fast way: a
// volume of this server with a single copy (replicated writes are
// net/http's, see above).
func (s *Server) fastWriteTakes(path string) bool {
	id, err := fid.Parse(path[1:])
	if err != nil {
		return false
	}
	v, ok := s.store.Volume(id.Volume)
	return ok && v.Stats().Replication.Copies() <= 1
}

// fastWriteOn reports whether uploads may take the fast path (on top of
// the fast read path's conditions). A write's token is checked by the
// handler the fast path calls (authorize), as under net/http.
func (s *Server) fastWriteOn() bool { return !s.cfg.NoFastWrite }

// serveFastWrite serves r, whose body is body, with h (st: the
// connection's TLS state, nil without TLS) and appends the
// answer to out[:0]; closeAfter: the connection is to be closed after the
// answer (the handler said "Connection: close", as the panic handler does).
// errNotFast comes with an answer net/http would frame otherwise (none of
// the handler's, see httpfast.Answer.Frame): the connection must then be
// closed with nothing sent.
func serveFastWrite(h http.Handler, r fastWriteReq, body []byte, remote string, st *tls.ConnectionState, out []byte) ([]byte, bool, error) {
	uri := r.path
	if r.query != "" {
		uri += "?" + r.query
	}
	req := &http.Request{
		Method: r.method, URL: &url.URL{Path: r.path, RawQuery: r.query}, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: r.header, Body: http.NoBody, ContentLength: r.n, Host: r.host, RemoteAddr: remote, RequestURI: uri,
		TLS: st,
	}
	if r.n > 0 {
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	// net/http's request context is cancelled when the client goes; here
	// the write runs to its end (and its fsync) whatever the client does,
	// as a handler past its last context check does under net/http too.
	req = req.WithContext(context.Background())
	w := httpfast.NewAnswer()
	h.ServeHTTP(w, req)
	out, closeAfter, err := w.Frame(out[:0])
	if err != nil {
		return out, false, errNotFast
	}
	return out, closeAfter, nil
}

// serveWrite answers the upload whose head is head, when it is one the
// fast path takes, on pc (st: its TLS state, nil without TLS). err nil:
// answered, go on with the next request; errNotFast: the request is
// net/http's, with everything buffered; done: pc is finished with (closed
// by serve). beforeRead is called before waiting
// for the body (it sets the head's deadline).
func (l *fastListener) serveWrite(pc *httpfast.PrefixConn, st *tls.ConnectionState, br *bufio.Reader, head []byte, out *[]byte, remote *string, beforeRead func()) (done bool, err error) {
	if !l.writes {
		return false, errNotFast
	}
	r, ok := parseFastWrite(head, br.Size()-len(head))
	if !ok || !l.s.fastWriteTakes(r.path) {
		return false, errNotFast
	}
	size := len(head) + int(r.n)
	if br.Buffered() < size {
		beforeRead()
		if _, err := br.Peek(size); err != nil {
			// The body did not come whole in time, or the client went:
			// net/http reads on (it has no deadline for bodies) or
			// answers the short body, as it did before.
			return false, errNotFast
		}
	}
	b, _ := br.Peek(size)
	c := pc.Conn
	if !l.MarkBusy(c, true, &l.writing) {
		return true, nil
	}
	if *remote == "" {
		*remote = c.RemoteAddr().String()
	}
	var closeAfter bool
	func() {
		defer l.writing.Done() // also when the handler aborts (a panic serve recovers)
		*out, closeAfter, err = serveFastWrite(l.s.httpSrv.Handler, r, b[len(head):], *remote, st, *out)
	}()
	br.Discard(size)
	if err != nil {
		// The handler's answer is not one framed here: a bug (all its
		// answers are, TestFastWriteDifferential). Cut the connection
		// rather than send something net/http would not.
		l.s.log.Error("volumeserver: fast write: answer not framed", "path", r.path)
		return true, nil
	}
	l.served.Add(1) // before the answer leaves: a test that read it finds it counted
	l.wrote.Add(1)
	_, err = c.Write(*out)
	if cap(*out) > 2*fastCopyMax {
		*out = nil
	}
	if err != nil || closeAfter || !l.MarkBusy(c, false, nil) {
		return true, nil
	}
	return false, nil
}
