package localread

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/kelpfs/kelp/internal/needle"
)

// ErrFallback means the read must take the HTTP path: no trusted volume
// server answers on this host for that address, or it said so.
var ErrFallback = errors.New("localread: fall back to HTTP")

// maxHeader bounds an answer's JSON header.
const maxHeader = 64 << 10

// answerTimeout bounds the wait for a server's answer, as the HTTP path's
// client.Config.AnswerTimeout does.
const answerTimeout = 10 * time.Second

// maxIdle is how many idle connections the Reader keeps per server.
const maxIdle = 8

// absentFor is how long a server found absent (no socket, or not trusted)
// is not asked again: a volume server started later is found after it.
const absentFor = 10 * time.Second

// Reader reads needles through the sockets of volume servers on this host.
// Safe for concurrent use.
type Reader struct {
	mu     sync.Mutex
	idle   map[string][]*net.UnixConn // by socket path
	absent map[string]time.Time       // socket path -> retry after
}

// NewReader returns a Reader; nil when this system has no short-circuit.
func NewReader() *Reader {
	if !supported {
		return nil
	}
	return &Reader{idle: map[string][]*net.UnixConn{}, absent: map[string]time.Time{}}
}

// Open reads needle fid's data from offset off, n bytes (-1: to the end),
// from the volume server clients know as addr. With verify, a read of the
// whole data checks its CRC at the end (needle.ErrCorrupt, the last piece
// withheld). The Header tells the needle's size and attributes. ErrFallback
// (or any other error): read over HTTP instead.
func (r *Reader) Open(addr, fid string, off, n int64, verify bool) (io.ReadCloser, Header, error) {
	path := SocketPath(addr)
	c, err := r.conn(path)
	if err != nil {
		return nil, Header{}, err
	}
	// A server that stopped answering (a stuck disk) must not hold the
	// reader: after answerTimeout the read takes HTTP, which fails over.
	c.SetDeadline(time.Now().Add(answerTimeout))
	h, data, fd, err := roundTrip(c, fid, off, n)
	if err != nil {
		c.Close()
		return nil, Header{}, err
	}
	c.SetDeadline(time.Time{}) // a closed connection fails its next use, and that read takes HTTP
	r.putIdle(path, c)
	switch {
	case h.Fallback:
		return nil, h, ErrFallback
	case fd < 0:
		return io.NopCloser(bytes.NewReader(data)), h, nil
	}
	end := h.Size
	if n >= 0 {
		end = min(end, off+n)
	}
	f := os.NewFile(uintptr(fd), "kelp-volume-file")
	b := &fileBody{f: f, pos: h.FileOff + off, end: h.FileOff + end, verify: verify && off == 0 && end == h.Size, want: h.CRC}
	return b, h, nil
}

// Serves reports whether the volume server clients know as addr answers
// local reads here: a trusted server holds its socket (the connection made
// to find out is kept for the read), and it was not found absent lately.
func (r *Reader) Serves(addr string) bool {
	path := SocketPath(addr)
	c, err := r.conn(path) // an idle one, else a new one; a server found absent is not asked again for absentFor
	if err != nil {
		return false
	}
	r.putIdle(path, c)
	return true
}

// goneLocked reports whether the server at path was found absent less than
// absentFor ago; r.mu held.
func (r *Reader) goneLocked(path string) bool {
	until, ok := r.absent[path]
	if ok && !time.Now().Before(until) {
		delete(r.absent, path)
		return false
	}
	return ok
}

// markGone notes the server at path absent for absentFor.
func (r *Reader) markGone(path string) {
	r.mu.Lock()
	r.absent[path] = time.Now().Add(absentFor)
	r.mu.Unlock()
}

// conn returns an idle connection to the socket at path, or a new one.
func (r *Reader) conn(path string) (*net.UnixConn, error) {
	r.mu.Lock()
	if r.goneLocked(path) {
		r.mu.Unlock()
		return nil, ErrFallback
	}
	if cs := r.idle[path]; len(cs) > 0 {
		c := cs[len(cs)-1]
		r.idle[path] = cs[:len(cs)-1]
		r.mu.Unlock()
		return c, nil
	}
	r.mu.Unlock()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err == nil && !trusted(peerUID(c)) {
		c.Close()
		err = fmt.Errorf("localread: %s is served by another user", path)
	}
	if err != nil {
		r.markGone(path)
		return nil, ErrFallback
	}
	return c, nil
}

func (r *Reader) putIdle(path string, c *net.UnixConn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.idle[path]) >= maxIdle {
		c.Close()
		return
	}
	r.idle[path] = append(r.idle[path], c)
}

// Close closes the idle connections.
func (r *Reader) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, cs := range r.idle {
		for _, c := range cs {
			c.Close()
		}
		delete(r.idle, p)
	}
}

// roundTrip asks for one read and reads the answer: its header, the inline
// data or the descriptor (fd, -1 if none).
func roundTrip(c *net.UnixConn, fid string, off, n int64) (h Header, data []byte, fd int, err error) {
	fd = -1
	defer func() {
		if err != nil && fd >= 0 {
			syscall.Close(fd)
			fd = -1
		}
	}()
	req := fid + " " + strconv.FormatInt(off, 10) + " " + strconv.FormatInt(n, 10) + "\n"
	if _, err = c.Write([]byte(req)); err != nil {
		return h, nil, fd, err
	}
	buf := make([]byte, 4096)
	oob := make([]byte, syscall.CmsgSpace(4*4))
	have := 0
	for have < 4 || have < 4+int(binary.BigEndian.Uint32(buf)) {
		if have == len(buf) {
			if len(buf) >= 4+maxHeader {
				return h, nil, fd, errors.New("localread: answer header too long")
			}
			buf = append(buf, make([]byte, len(buf))...)
		}
		nr, noob, _, _, rerr := c.ReadMsgUnix(buf[have:], oob)
		if noob > 0 {
			if fd, err = takeFD(oob[:noob], fd); err != nil {
				return h, nil, fd, err
			}
		}
		have += nr
		if rerr != nil {
			return h, nil, fd, rerr
		}
		if nr == 0 {
			return h, nil, fd, io.ErrUnexpectedEOF
		}
		if have >= 4 && binary.BigEndian.Uint32(buf) > maxHeader {
			return h, nil, fd, errors.New("localread: answer header too long")
		}
	}
	hl := 4 + int(binary.BigEndian.Uint32(buf))
	if err = json.Unmarshal(buf[4:hl], &h); err != nil {
		return h, nil, fd, fmt.Errorf("localread: answer header: %w", err)
	}
	switch {
	case h.Inline < 0 || h.Inline > 1<<30 || int64(have-hl) > h.Inline:
		return h, nil, fd, errors.New("localread: malformed answer")
	case fd >= 0 && (h.Inline > 0 || have > hl):
		return h, nil, fd, errors.New("localread: data with a descriptor answer")
	case fd < 0: // inline data (maybe none: an empty needle, a fallback)
		data = make([]byte, h.Inline)
		got := copy(data, buf[hl:have])
		if _, err = io.ReadFull(c, data[got:]); err != nil {
			return h, nil, fd, err
		}
	}
	return h, data, fd, nil
}

// takeFD keeps the first descriptor of the control messages and closes any
// other (fd: the one kept so far, -1 if none).
func takeFD(oob []byte, fd int) (int, error) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return fd, fmt.Errorf("localread: control message: %w", err)
	}
	for _, m := range msgs {
		fds, err := syscall.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, f := range fds {
			if fd < 0 {
				fd = f
			} else {
				syscall.Close(f)
			}
		}
	}
	return fd, nil
}

// fileBody reads [pos, end) of a volume file.
type fileBody struct {
	f        *os.File
	pos, end int64
	verify   bool
	crc      uint32
	want     uint32
	err      error // a checksum mismatch, returned from then on
}

func (b *fileBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.pos >= b.end {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), b.end-b.pos)]
	n, err := b.f.ReadAt(p, b.pos)
	if err == io.EOF && n == len(p) {
		err = nil
	} else if err == io.EOF {
		err = fmt.Errorf("%w: data ends early", needle.ErrCorrupt)
	}
	b.pos += int64(n)
	if b.verify {
		b.crc = needle.UpdateCRC(b.crc, p[:n])
		if err == nil && b.pos == b.end && b.crc != b.want {
			// The last piece is withheld, as the volume server's own
			// reader does: the read must end short, not look complete.
			b.err = fmt.Errorf("%w: checksum mismatch", needle.ErrCorrupt)
			return 0, b.err
		}
	}
	return n, err
}

func (b *fileBody) Close() error { return b.f.Close() }
