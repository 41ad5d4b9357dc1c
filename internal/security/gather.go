package security

import (
	"net"
	"sync"
)

// A TLS connection writes every record of at most 16 KiB with a write of
// its own: a 1 MiB response costs 64 system calls, which on loopback cost
// more than the encryption. The listener puts a gatherConn under each TLS
// connection; the HTTP server (internal/httpserve) brackets each large
// response write with Gather and Release, and the records of that write
// leave in writes of up to gatherSize bytes. Outside a bracket (the
// handshake, alerts, small writes) every write goes through at once, so
// nothing waits in the buffer after a write returns.

// gatherSize is the most a gathered write holds: a response write of 256
// KiB (the S3 gateway's and httpserve's copy pieces) with its records'
// overhead (22 bytes a record in TLS 1.3, 29 in 1.2) and the response
// header before it, in one write; at 256 KiB even, each piece took two
// (one of them a single record).
const gatherSize = 256<<10 + 4<<10

var gatherBufs = sync.Pool{New: func() any { b := make([]byte, 0, gatherSize); return &b }}

// gatherListener wraps the TCP connections a TLS listener serves.
type gatherListener struct{ net.Listener }

func (l gatherListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &gatherConn{Conn: c}, nil
}

// gatherConn is the connection under a TLS server connection.
type gatherConn struct {
	net.Conn
	mu  sync.Mutex
	bp  *[]byte // the buffer while gathering, else nil
	err error   // the first write error while gathering
}

func (c *gatherConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bp == nil {
		return c.Conn.Write(p)
	}
	if c.err != nil {
		return 0, c.err
	}
	b := *c.bp
	if len(b)+len(p) > cap(b) {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
		b = *c.bp
		if len(p) > cap(b) {
			return c.write(p)
		}
	}
	*c.bp = append(b, p...)
	return len(p), nil
}

func (c *gatherConn) write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

func (c *gatherConn) flushLocked() error {
	b := *c.bp
	if len(b) == 0 {
		return c.err
	}
	_, err := c.write(b)
	*c.bp = b[:0]
	return err
}

// Gather holds the writes that follow until Release.
func (c *gatherConn) Gather() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bp == nil {
		c.bp = gatherBufs.Get().(*[]byte)
		*c.bp = (*c.bp)[:0]
		c.err = nil
	}
}

// Release sends what was held and ends the gathering; its error is the
// first error of a write since Gather.
func (c *gatherConn) Release() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bp == nil {
		return nil
	}
	err := c.flushLocked()
	gatherBufs.Put(c.bp)
	c.bp = nil
	c.err = nil
	return err
}
