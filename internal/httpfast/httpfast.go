// Package httpfast holds the pieces a server needs to answer a strict
// subset of HTTP/1.1 requests outside net/http and hand everything else to
// it, as the volume server's fast read and write paths
// (internal/volumeserver/fastread.go, fastwrite.go) and the master's fast
// assign (internal/master/fastassign.go) do: finding where a request's
// head ends by a rule on which every HTTP/1.1 reader agrees (no request
// smuggling), a connection whose buffered bytes are read again by net/http,
// and a ResponseWriter that frames a handler's answer byte for byte as
// net/http's server does.
package httpfast

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// ErrNotFast: the request (or the answer) is not one the fast path takes.
var ErrNotFast = errors.New("httpfast: not a fast request")

// HeadEnd scans b from from on for the end of a request head, "\r\n\r\n":
// end is the length of the head, 0 if it has not all arrived (next is then
// where to go on scanning). ok is false, and the request is net/http's, at
// the first byte where a lenient reader and a strict one could disagree on
// where a line or the head ends: a CR not followed by LF, an LF not after
// a CR (net/http takes a bare LF as a line end), or any other control
// character but HTAB. A head of CRLF lines of printable bytes, HTAB and
// obs-text is read the same by every reader.
func HeadEnd(b []byte, from int) (end, next int, ok bool) {
	for i := from; i < len(b); i++ {
		switch c := b[i]; {
		case c == '\r':
			if i+1 == len(b) {
				return 0, i, true // its LF is still to come
			}
			if b[i+1] != '\n' {
				return 0, 0, false
			}
		case c == '\n':
			if i == 0 || b[i-1] != '\r' {
				return 0, 0, false
			}
			if i >= 3 && b[i-2] == '\n' && b[i-3] == '\r' {
				return i + 1, 0, true
			}
		case c < ' ' && c != '\t', c == 0x7f:
			return 0, 0, false
		}
	}
	return 0, len(b), true
}

// PeekHead returns the request's head (request line and headers, through
// the blank line) from br without consuming it. ErrNotFast: methodOK says
// no to its first bytes, its head does not fit the buffer, or it has a
// byte HeadEnd refuses. beforeRead is called before each read from the
// connection the head needs.
func PeekHead(br *bufio.Reader, methodOK func([]byte) bool, beforeRead func()) ([]byte, error) {
	scanned := 0
	for {
		b, _ := br.Peek(br.Buffered())
		if !methodOK(b) {
			return nil, ErrNotFast
		}
		end, next, ok := HeadEnd(b, scanned)
		if !ok {
			return nil, ErrNotFast
		}
		if end > 0 {
			return b[:end], nil
		}
		scanned = next
		if len(b) >= br.Size() {
			return nil, ErrNotFast
		}
		beforeRead()
		if _, err := br.Peek(len(b) + 1); err != nil {
			return nil, err
		}
	}
}

// PrefixOf reports whether b and s agree on their common length.
func PrefixOf(b []byte, s string) bool {
	n := min(len(b), len(s))
	return string(b[:n]) == s[:n]
}

// EqualFold reports whether b is lower, ASCII case aside.
func EqualFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := range b {
		c := b[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// HostChar: a byte of a Host header the fast paths take (letters, digits,
// "._-:[]"), all of which net/http's server accepts.
func HostChar(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' ||
		c == '.' || c == '_' || c == '-' || c == ':' || c == '[' || c == ']'
}

// Date is the Date header's value, formatted once a second.
func Date() []byte {
	now := time.Now()
	sec := now.Unix()
	if d := dateCache.Load(); d != nil && d.sec == sec {
		return d.b
	}
	d := &cachedDate{sec: sec, b: now.UTC().AppendFormat(nil, http.TimeFormat)}
	dateCache.Store(d)
	return d.b
}

type cachedDate struct {
	sec int64
	b   []byte
}

var dateCache atomic.Pointer[cachedDate]

// PrefixConn is a connection as a fast path and net/http read it: the
// bytes an earlier reader took from the socket but did not consume come
// first. Conn is the TCP connection, or the TLS connection over it (its
// handshake done). CloseWrite and ReadFrom (sendfile, over TCP) pass
// through to it.
type PrefixConn struct {
	net.Conn
	Pending []byte
}

func (c *PrefixConn) Read(p []byte) (int, error) {
	if len(c.Pending) > 0 {
		n := copy(p, c.Pending)
		c.Pending = c.Pending[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// WriteTo hides the TCP connection's own (splice), which would skip the
// pending bytes.
func (c *PrefixConn) WriteTo(w io.Writer) (int64, error) {
	return io.Copy(w, struct{ io.Reader }{c})
}

// ReadFrom is the TCP connection's (sendfile, splice) when Conn is one.
func (c *PrefixConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// CloseWrite shuts down the writing side (net/http's graceful close).
func (c *PrefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// TLSConn is the TLS connection c reads, nil when c is plain TCP: a
// server's connection context takes the TLS state of a request net/http
// serves on c from it (net/http sets Request.TLS only on a *tls.Conn).
func (c *PrefixConn) TLSConn() *tls.Conn {
	tc, _ := c.Conn.(*tls.Conn)
	return tc
}

// TLSState is the state of the TLS connection c reads (its handshake
// done), nil when c is plain TCP: a request served outside net/http
// carries it as Request.TLS. Each call copies it: take it once per
// connection.
func (c *PrefixConn) TLSState() *tls.ConnectionState {
	tc := c.TLSConn()
	if tc == nil {
		return nil
	}
	st := tc.ConnectionState()
	return &st
}

// Rest is what is still to be read from c after the buffered bytes b, as
// a new PrefixConn.
func (c *PrefixConn) Rest(b []byte) *PrefixConn {
	return &PrefixConn{Conn: c.Conn, Pending: append(append([]byte(nil), b...), c.Pending...)}
}

// Answer is the ResponseWriter of a request served outside net/http: it
// keeps the handler's answer, and Frame writes it as net/http would.
// (Flush and Hijack are not offered: a handler that needs them is not one
// to serve this way.)
type Answer struct {
	header http.Header
	code   int
	body   []byte
}

// NewAnswer returns an empty answer.
func NewAnswer() *Answer { return &Answer{header: make(http.Header, 4)} }

func (w *Answer) Header() http.Header { return w.header }

func (w *Answer) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *Answer) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.body = append(w.body, p...)
	return len(p), nil
}

// answerMax: an answer without a Content-Length gets one from net/http
// only when it is done within its first buffer (2 KiB; else it is sent
// chunked); the answers framed here stay well under that.
const answerMax = 1024

// Frame appends the whole answer to out: status line, headers and body,
// as net/http's chunkWriter.writeHeader writes them for a complete answer
// to an HTTP/1.1 keep-alive request without a body left unread: the
// handler's headers sorted (values with CR and LF made spaces and trimmed),
// then Date unless the handler set one, then the Content-Length net/http
// computes when the handler set none. closeAfter: the handler said
// "Connection: close" (the connection is closed after the answer, as
// net/http closes it). An answer outside what is proved the same (1xx, 204,
// 304, an odd Content-Length, Transfer-Encoding, trailers, another
// Connection value, an invalid header name, no Content-Type on a body:
// net/http would sniff one) is ErrNotFast.
func (w *Answer) Frame(out []byte) (_ []byte, closeAfter bool, err error) {
	code := w.code
	if code == 0 {
		code = http.StatusOK
	}
	h := w.header
	_, te := h["Transfer-Encoding"]
	_, trailer := h["Trailer"]
	if code < 200 || code > 599 || code == http.StatusNoContent || code == http.StatusNotModified || te || trailer {
		return out, false, ErrNotFast
	}
	// Presence, not values, decides in net/http (header.has): a key with
	// no values counts as set, and writes no line.
	if c, ok := h["Connection"]; ok {
		if len(c) != 1 || c[0] != "close" {
			return out, false, ErrNotFast
		}
		closeAfter = true
	}
	addLength := false
	if cl, ok := h["Content-Length"]; ok {
		if len(cl) != 1 || cl[0] != strconv.Itoa(len(w.body)) {
			return out, false, ErrNotFast
		}
	} else if len(w.body) > answerMax {
		return out, false, ErrNotFast
	} else {
		addLength = true
	}
	if _, ok := h["Content-Type"]; !ok && len(w.body) > 0 {
		return out, false, ErrNotFast
	}
	_, hasDate := h["Date"]
	text := http.StatusText(code)
	if text == "" {
		return out, false, ErrNotFast
	}
	var kb [8]string
	keys := kb[:0]
	for k := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) || !httpguts.ValidHeaderFieldName(k) {
			return out, false, ErrNotFast
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out = append(out, "HTTP/1.1 "...)
	out = strconv.AppendInt(out, int64(code), 10)
	out = append(append(append(out, ' '), text...), "\r\n"...)
	for _, k := range keys {
		for _, v := range h[k] {
			out = append(append(append(append(out, k...), ": "...), headerValue(v)...), "\r\n"...)
		}
	}
	if !hasDate {
		out = append(append(append(out, "Date: "...), Date()...), "\r\n"...)
	}
	if addLength {
		out = append(out, "Content-Length: "...)
		out = strconv.AppendInt(out, int64(len(w.body)), 10)
		out = append(out, "\r\n"...)
	}
	return append(append(out, "\r\n"...), w.body...), closeAfter, nil
}

// headerValue is a header value as net/http writes it: CR and LF become
// spaces, and leading and trailing spaces and tabs go.
func headerValue(v string) string {
	if strings.ContainsAny(v, "\r\n") {
		v = strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
	}
	return strings.Trim(v, " \t")
}
