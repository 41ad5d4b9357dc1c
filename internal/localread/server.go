package localread

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Answer is the volume server's answer to one read.
type Answer struct {
	Header Header
	// Data is the range asked for of a needle read whole (small needles).
	Data []byte
	// File is the volume file of a large needle; its descriptor is sent.
	File syscall.Conn
	// Done, if set, runs once the answer is sent (it releases File).
	Done func()
}

// Lookup answers a read of needle fid from data offset off, n bytes (-1: to
// the end). ok false makes the reader take HTTP.
type Lookup func(fid string, off, n int64) (a Answer, ok bool)

// maxRequest bounds a request line: a file id and two numbers.
const maxRequest = 256

// Server answers local reads on a Unix socket.
type Server struct {
	ln     *net.UnixListener
	lookup Lookup
	log    *slog.Logger

	mu     sync.Mutex
	conns  map[*net.UnixConn]struct{}
	closed bool
	wg     sync.WaitGroup

	// lastRefusal is when a refused peer was last logged: any local user
	// can connect to an abstract socket, and must not flood the log.
	lastRefusal atomic.Int64
}

// refusalLogEvery is how often a refused peer is logged at most.
const refusalLogEvery = time.Minute

// Listen binds the socket name (SocketPath); it fails if another process
// holds it.
func Listen(name string, lookup Lookup, log *slog.Logger) (*Server, error) {
	if !supported {
		return nil, errors.New("localread: not supported on this system")
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: name, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("localread: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{ln: ln, lookup: lookup, log: log, conns: map[*net.UnixConn]struct{}{}}, nil
}

// Path is the socket's path.
func (s *Server) Path() string { return s.ln.Addr().String() }

// Serve accepts connections until Close.
func (s *Server) Serve() {
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

// Close stops serving, frees the socket's name and waits for the answers
// being sent.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.ln.Close()
	s.wg.Wait()
}

func (s *Server) serveConn(c *net.UnixConn) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
		s.wg.Done()
	}()
	if uid, ok := peerUID(c); !trusted(uid, ok) {
		now := time.Now().UnixNano()
		if last := s.lastRefusal.Load(); now-last >= int64(refusalLogEvery) && s.lastRefusal.CompareAndSwap(last, now) {
			s.log.Warn("local read refused: the peer is neither root nor this server's user (logged once a minute at most)", "uid", uid)
		}
		return
	}
	br := bufio.NewReaderSize(c, maxRequest)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return
		}
		fid, off, n, ok := parseRequest(line)
		if !ok {
			s.log.Warn("local read: malformed request", "line", string(line))
			return
		}
		a, ok := s.lookup(fid, off, n)
		if ok && off > 0 && off >= a.Header.Size {
			ok = false // HTTP's 416 is the answer
		}
		err = send(c, a, ok)
		if a.Done != nil {
			a.Done()
		}
		if err != nil {
			return
		}
	}
}

// parseRequest parses "FID OFF N\n".
func parseRequest(line []byte) (fid string, off, n int64, ok bool) {
	f := strings.Fields(string(line[:len(line)-1]))
	if len(f) != 3 {
		return "", 0, 0, false
	}
	off, err1 := strconv.ParseInt(f[1], 10, 64)
	n, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || off < 0 || n < -1 || n == 0 {
		return "", 0, 0, false
	}
	return f[0], off, n, true
}

// send writes the answer: length, header, the descriptor with them, then
// any inline data.
func send(c *net.UnixConn, a Answer, ok bool) error {
	h := a.Header
	if !ok {
		h, a.Data, a.File = Header{Fallback: true}, nil, nil
	}
	h.Inline = int64(len(a.Data))
	js, err := json.Marshal(h)
	if err != nil {
		return err
	}
	msg := make([]byte, 4+len(js))
	binary.BigEndian.PutUint32(msg, uint32(len(js)))
	copy(msg[4:], js)
	if a.File != nil && a.Data == nil {
		rc, err := a.File.SyscallConn()
		if err != nil {
			return err
		}
		var n int
		var werr error
		if err := rc.Control(func(fd uintptr) {
			n, _, werr = c.WriteMsgUnix(msg, syscall.UnixRights(int(fd)), nil)
		}); err != nil {
			return err
		}
		if werr == nil && n < len(msg) {
			_, werr = c.Write(msg[n:])
		}
		return werr
	}
	if _, err := c.Write(msg); err != nil {
		return err
	}
	if len(a.Data) > 0 {
		_, err = c.Write(a.Data)
	}
	return err
}
