package s3

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"
)

// countingReader tells when its reads pass a position.
type countingReader struct {
	r    io.Reader
	pos  int64
	at   int64
	past chan struct{}
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.pos += int64(n)
	if c.pos > c.at && c.past != nil {
		close(c.past)
		c.past = nil
	}
	return n, err
}

// slowWriter holds its first Write until the body has been read past the
// first buffer: a copy that reads only after each write never gets there.
type slowWriter struct {
	bytes.Buffer
	wait   chan struct{}
	failed bool
}

func (w *slowWriter) Write(p []byte) (int, error) {
	if w.wait != nil {
		select {
		case <-w.wait:
		case <-time.After(10 * time.Second):
			w.failed = true
		}
		w.wait = nil
	}
	return w.Buffer.Write(p)
}

func newCopyServer() *Server {
	s := &Server{}
	s.bufs.New = func() any { b := make([]byte, copyBufSize); return &b }
	return s
}

// A large body is read ahead while the previous buffer is being written.
func TestCopyBodyReadsAhead(t *testing.T) {
	data := bytes.Repeat([]byte("kelp large read "), 100<<10) // 1.6 MB
	past := make(chan struct{})
	body := &countingReader{r: bytes.NewReader(data), at: 256 << 10, past: past}
	w := &slowWriter{wait: past}
	n, err := newCopyServer().copyBody(w, body, int64(len(data)))
	if err != nil || n != int64(len(data)) || !bytes.Equal(w.Bytes(), data) {
		t.Fatalf("copied %d of %d bytes, err %v", n, len(data), err)
	}
	if w.failed {
		t.Fatal("the body was not read while the first buffer was being written")
	}
}

type failingReader struct{ left int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.left == 0 {
		return 0, errors.New("chunk lost")
	}
	n := min(len(p), f.left)
	f.left -= n
	return n, nil
}

type failingWriter struct{ n int }

func (f *failingWriter) Write(p []byte) (int, error) {
	if f.n++; f.n == 2 {
		return 0, errors.New("client gone")
	}
	return len(p), nil
}

// A body that fails mid-way and a writer that fails both end the copy
// with their error, after what came before.
func TestCopyBodyErrors(t *testing.T) {
	s := newCopyServer()
	n, err := s.copyBody(io.Discard, &failingReader{left: 700 << 10}, 2<<20)
	if err == nil || n != 700<<10 {
		t.Fatalf("a failing body: copied %d, err %v", n, err)
	}
	n, err = s.copyBody(&failingWriter{}, bytes.NewReader(make([]byte, 2<<20)), 2<<20)
	if err == nil || n != copyBufSize {
		t.Fatalf("a failing writer: copied %d, err %v", n, err)
	}
}
