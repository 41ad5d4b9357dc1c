package client

import (
	"bytes"
	"context"
	"io"
	"net"
)

// bodyConn is a client connection that sends a request body held in memory
// (a memBody: Upload's *bytes.Reader, as PutBytes makes) with one write,
// from where it lies.
//
// net/http hands a body of known length to the connection's ReadFrom
// wrapped in an io.LimitedReader, which neither sendfile nor splice take,
// so net.TCPConn falls back to io.Copy through a 32 KiB buffer: a copy of
// every byte and a write(2) per 32 KiB. For the mount's 8 MiB chunks that
// copy was a quarter of the mount's CPU while writing a large file.
type bodyConn struct {
	net.Conn
}

// ReadFrom sends r, the rest of a request body (after what net/http's
// write buffer took), to the connection.
func (c bodyConn) ReadFrom(r io.Reader) (int64, error) {
	if lr, ok := r.(*io.LimitedReader); ok {
		if b, ok := lr.R.(memBody); ok && int64(b.Len()) <= lr.N {
			n, err := b.WriteTo(c.Conn)
			lr.N -= n
			return n, err
		}
	}
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r) // sendfile or splice where they apply
	}
	return io.Copy(writerOnly{c.Conn}, r)
}

// memBody is a request body held in memory. Having its own Close keeps
// net/http from wrapping it in a NopCloser, which would hide it from
// bodyConn.
type memBody struct{ *bytes.Reader }

func (memBody) Close() error { return nil }

// requestBody is body as a request's Body (nil stays nil): a *bytes.Reader
// as a memBody, any other reader as net/http would wrap it.
func requestBody(body io.Reader) io.ReadCloser {
	switch b := body.(type) {
	case nil:
		return nil
	case *bytes.Reader:
		return memBody{b}
	case io.ReadCloser:
		return b
	default:
		return io.NopCloser(b)
	}
}

// writerOnly hides a writer's ReadFrom, so that io.Copy does not call it
// back.
type writerOnly struct{ io.Writer }

// dialBodyConns wraps the connections dial makes in bodyConn.
func dialBodyConns(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return bodyConn{c}, nil
	}
}
