package benchmark

// A lean HTTP/1.1 client for the benchmark's own requests (assign, upload,
// read). net/http's client costs about 40 µs of CPU per small request on
// this hardware (a request and a response object, header maps, a read and a
// write goroutine per connection and the wake-ups between them, a context
// and a timer per request): as much as the volume server spends answering
// it, so the benchmark measured its own client as much as the cluster. Here
// each worker owns one kept-alive connection per server and writes its
// request and reads the answer on its own goroutine, with no pipelining.
//
// It speaks HTTP/1.1, over TLS when the process does (the same client
// configuration as the library client's): the answer's status line and
// headers are parsed strictly (Content-Length, chunked Transfer-Encoding,
// Connection: close, 1xx answers skipped, a body read to the connection's
// end when neither length nor chunking is given), and the callers check the
// status, the length and the content. Reads that need a token go through
// the library client (see rawRead).

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/kelpfs/kelp/internal/security"
)

const (
	// rawAnswerWithin bounds the wait for each answer (the library client's
	// AnswerTimeout): a server that stopped answering fails the request.
	rawAnswerWithin = 10 * time.Second
)

// errRawProtocol marks an answer that is not well-formed HTTP/1.1.
var errRawProtocol = errors.New("benchmark: malformed HTTP answer")

// rawConns is one worker's connections, one per server ("host:port").
type rawConns struct {
	ctx   context.Context
	conns map[string]*rawConn
	dial  net.Dialer
	tls   *tls.Config // nil: plain HTTP
}

// newRawConns returns a worker's connections, speaking TLS with tlsConfig
// (nil: plain HTTP).
func newRawConns(ctx context.Context, tlsConfig *tls.Config) *rawConns {
	return &rawConns{ctx: ctx, conns: map[string]*rawConn{}, dial: net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second},
		tls: tlsConfig}
}

// rawConn is one kept-alive connection.
type rawConn struct {
	nc       net.Conn
	br       *bufio.Reader
	stop     func() bool // unregisters the context watch
	answered int         // answers read on it
	deadline time.Time   // the read/write deadline set last
	head     []byte      // the request being written
}

// closeAll closes every connection.
func (rs *rawConns) closeAll() {
	for h, c := range rs.conns {
		c.close()
		delete(rs.conns, h)
	}
}

func (c *rawConn) close() {
	c.stop()
	c.nc.Close()
}

func (rs *rawConns) get(host string) (*rawConn, error) {
	if c := rs.conns[host]; c != nil {
		return c, nil
	}
	nc, err := rs.dial.DialContext(rs.ctx, "tcp", host)
	if err != nil {
		return nil, err
	}
	if rs.tls != nil {
		if nc, err = rs.handshake(nc, host); err != nil {
			return nil, err
		}
	}
	c := &rawConn{nc: nc, br: bufio.NewReaderSize(nc, 16<<10)}
	// The run's end breaks a request under way.
	c.stop = context.AfterFunc(rs.ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	rs.conns[host] = c
	return c, nil
}

// handshake starts TLS on nc to host, checking the certificate's name as
// net/http does (the host without its port).
func (rs *rawConns) handshake(nc net.Conn, host string) (net.Conn, error) {
	cfg := rs.tls.Clone()
	if cfg.ServerName == "" {
		name, _, err := net.SplitHostPort(host)
		if err != nil {
			nc.Close()
			return nil, err
		}
		cfg.ServerName = name
	}
	tc := tls.Client(nc, cfg)
	ctx, cancel := context.WithTimeout(rs.ctx, rs.dial.Timeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return tc, nil
}

// rawAnswer is what do read: the status, the body's length (what the
// headers announced, or what arrived), and the body's first bytes in dst.
type rawAnswer struct {
	status int
	length int64 // body bytes received (more than len(dst) when it overflowed)
	n      int   // body bytes in dst
}

// do sends one request to host: method, target (path and query), extra
// header lines (each ending in CRLF) and body, and reads the answer's body
// into dst (what does not fit is read and dropped, and counted in length).
// A connection kept alive from an earlier request that turns out closed
// before any byte of the answer arrives (the server closed it while idle)
// is replaced once, as net/http does; nothing else is retried.
func (rs *rawConns) do(host, method, target, headers string, body, dst []byte) (rawAnswer, error) {
	for attempt := 0; ; attempt++ {
		c, err := rs.get(host)
		if err != nil {
			return rawAnswer{}, err
		}
		reused := c.answered > 0
		a, started, err := c.roundTrip(host, method, target, headers, body, dst)
		if err == nil {
			c.answered++
			return a, nil
		}
		c.close()
		delete(rs.conns, host)
		if err == errAnswerClosed {
			return a, nil
		}
		if rs.ctx.Err() != nil {
			return a, rs.ctx.Err()
		}
		if !reused || started || attempt > 0 {
			return a, err
		}
	}
}

// roundTrip writes the request and reads the answer; started says whether
// any byte of the answer arrived. An error leaves c unusable;
// errAnswerClosed comes with a whole answer after which c must be closed.
func (c *rawConn) roundTrip(host, method, target, headers string, body, dst []byte) (a rawAnswer, started bool, err error) {
	now := time.Now()
	if c.deadline.Sub(now) < rawAnswerWithin {
		// Move the deadline on at most once a second: each request gets
		// between 10 and 11 s.
		c.deadline = now.Add(rawAnswerWithin + time.Second)
		c.nc.SetDeadline(c.deadline)
	}
	h := append(c.head[:0], method...)
	h = append(h, ' ')
	h = append(h, target...)
	h = append(h, " HTTP/1.1\r\nHost: "...)
	h = append(h, host...)
	h = append(h, "\r\n"...)
	h = append(h, headers...)
	if body != nil || method == "PUT" || method == "POST" {
		h = append(h, "Content-Length: "...)
		h = strconv.AppendInt(h, int64(len(body)), 10)
		h = append(h, "\r\n"...)
	}
	h = append(h, "\r\n"...)
	if len(body) <= 64<<10 {
		h = append(h, body...)
		_, err = c.nc.Write(h)
	} else {
		bufs := net.Buffers{h, body}
		_, err = bufs.WriteTo(c.nc)
	}
	c.head = h[:0]
	if cap(c.head) > 128<<10 {
		c.head = nil
	}
	if err != nil {
		return a, false, err
	}
	if _, err := c.br.Peek(1); err != nil {
		return a, false, err
	}
	a, keep, err := readAnswer(c.br, method == "HEAD", dst)
	if err != nil {
		return a, true, err
	}
	if !keep {
		return a, true, errAnswerClosed
	}
	return a, true, nil
}

// errAnswerClosed: the server closed the connection after a whole answer;
// do returns the answer, and the connection is not reused.
var errAnswerClosed = errors.New("benchmark: connection closed by the server")

// readAnswer reads one answer (skipping 1xx ones) from br: its status and
// body, into dst. keep says whether the connection may carry another request.
func readAnswer(br *bufio.Reader, isHead bool, dst []byte) (a rawAnswer, keep bool, err error) {
	for {
		var clen int64 = -1
		chunked, closing := false, false
		line, err := readLine(br)
		if err != nil {
			return a, false, err
		}
		// "HTTP/1.1 200 OK": the version, a space, three digits, then a
		// space and a reason, or nothing.
		if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || (line[7] != '1' && line[7] != '0') ||
			line[8] != ' ' || (len(line) > 12 && line[12] != ' ') {
			return a, false, fmt.Errorf("%w: status line %q", errRawProtocol, trimmed(line))
		}
		status := 0
		for _, d := range line[9:12] {
			if d < '0' || d > '9' {
				return a, false, fmt.Errorf("%w: status line %q", errRawProtocol, trimmed(line))
			}
			status = status*10 + int(d-'0')
		}
		if line[7] == '0' {
			closing = true // HTTP/1.0 closes unless told otherwise
		}
		for {
			h, err := readLine(br)
			if err != nil {
				return a, false, err
			}
			if len(h) == 0 {
				break
			}
			name, value, ok := bytes.Cut(h, []byte(":"))
			if !ok || len(name) == 0 || bytes.ContainsAny(name, " \t") {
				return a, false, fmt.Errorf("%w: header line %q", errRawProtocol, trimmed(h))
			}
			value = bytes.TrimSpace(value)
			switch {
			case asciiFold(name, "content-length"):
				n, err := strconv.ParseInt(string(value), 10, 64)
				if err != nil || n < 0 || (clen >= 0 && n != clen) {
					return a, false, fmt.Errorf("%w: Content-Length %q", errRawProtocol, trimmed(value))
				}
				clen = n
			case asciiFold(name, "transfer-encoding"):
				if !asciiFold(value, "chunked") {
					return a, false, fmt.Errorf("%w: Transfer-Encoding %q", errRawProtocol, trimmed(value))
				}
				chunked = true
			case asciiFold(name, "connection"):
				for _, tok := range strings.Split(string(value), ",") {
					switch strings.ToLower(strings.TrimSpace(tok)) {
					case "close":
						closing = true
					case "keep-alive":
						if line[7] == '0' {
							closing = false
						}
					}
				}
			}
		}
		if status >= 100 && status < 200 {
			if status == 101 {
				return a, false, fmt.Errorf("%w: unexpected 101 Switching Protocols", errRawProtocol)
			}
			continue // an interim answer; the real one follows
		}
		a.status = status
		switch {
		case isHead || status == 204 || status == 304:
			return a, !closing, nil
		case chunked:
			err = readChunked(br, dst, &a)
			return a, !closing && err == nil, err
		case clen >= 0:
			err = readBody(br, clen, dst, &a)
			return a, !closing && err == nil, err
		default: // the body runs to the connection's end
			err = readBody(br, -1, dst, &a)
			return a, false, err
		}
	}
}

// readBody reads n bytes (n < 0: up to EOF) into dst, dropping the overflow.
func readBody(r io.Reader, n int64, dst []byte, a *rawAnswer) error {
	var scratch []byte // for what does not fit dst
	for n != 0 {
		buf := dst[a.n:]
		if len(buf) == 0 {
			if scratch == nil {
				scratch = make([]byte, 4096)
			}
			buf = scratch
		}
		if n > 0 && int64(len(buf)) > n {
			buf = buf[:n]
		}
		m, err := r.Read(buf)
		if len(dst) > a.n {
			a.n += m
		}
		a.length += int64(m)
		if n > 0 {
			n -= int64(m)
		}
		if err == io.EOF && n < 0 {
			return nil
		}
		if err == io.EOF {
			return io.ErrUnexpectedEOF
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readChunked reads a chunked body and its trailer.
func readChunked(br *bufio.Reader, dst []byte, a *rawAnswer) error {
	for {
		line, err := readLine(br)
		if err != nil {
			return err
		}
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		size, err := strconv.ParseUint(string(bytes.TrimSpace(line)), 16, 62)
		if err != nil {
			return fmt.Errorf("%w: chunk size %q", errRawProtocol, trimmed(line))
		}
		if size == 0 {
			for { // the trailer, up to its blank line
				t, err := readLine(br)
				if err != nil {
					return err
				}
				if len(t) == 0 {
					return nil
				}
			}
		}
		if err := readBody(br, int64(size), dst, a); err != nil {
			return err
		}
		if crlf, err := readLine(br); err != nil || len(crlf) != 0 {
			if err == nil {
				err = fmt.Errorf("%w: no CRLF after a chunk", errRawProtocol)
			}
			return err
		}
	}
}

// readLine reads one CRLF-ended line (without it); a bare LF is malformed.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return nil, fmt.Errorf("%w: a header line longer than %d bytes", errRawProtocol, br.Size())
	}
	if err == io.EOF && len(line) > 0 {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("%w: a line not ended by CRLF", errRawProtocol)
	}
	return line[:len(line)-2], nil
}

func asciiFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

func trimmed(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

// HTTP1 is the lean client for one worker of another workload (the suite's
// filer workloads): one kept-alive connection per server, used by one
// goroutine at a time.
type HTTP1 struct{ rs *rawConns }

// NewHTTP1 returns a client whose requests end when ctx does, speaking TLS
// when the process does.
func NewHTTP1(ctx context.Context) *HTTP1 {
	return &HTTP1{rs: newRawConns(ctx, security.Process().ClientConfig())}
}

// Do sends method target (path and query) to host ("host:port") with the
// extra header lines headers (each ending in CRLF) and body, and reads the
// answer's body into dst. It returns the status, the body's length, and
// how much of it is in dst (what did not fit was read and dropped).
func (h *HTTP1) Do(host, method, target, headers string, body, dst []byte) (status int, length int64, n int, err error) {
	a, err := h.rs.do(host, method, target, headers, body, dst)
	return a.status, a.length, a.n, err
}

// Close closes the connections.
func (h *HTTP1) Close() { h.rs.closeAll() }
