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
	s.bigBufs.New = func() any { b := make([]byte, bigBufSize); return &b }
	return s
}

// A large body is read ahead while the previous buffer is being written,
// three buffers ahead, encrypted or not.
func TestCopyBodyReadsAhead(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sealed bool
		size   int
		ahead  int64 // read past this while the first Write waits
	}{
		{"sealed", true, 8 * copyBufSize, 3 * copyBufSize},
		{"plain", false, 8 * bigBufSize, 3 * bigBufSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := bytes.Repeat([]byte("kelp large read "), tc.size/16)
			past := make(chan struct{})
			body := &countingReader{r: bytes.NewReader(data), at: tc.ahead, past: past}
			w := &slowWriter{wait: past}
			n, err := newCopyServer().copyBody(w, body, int64(len(data)), tc.sealed)
			if err != nil || n != int64(len(data)) || !bytes.Equal(w.Bytes(), data) {
				t.Fatalf("copied %d of %d bytes, err %v", n, len(data), err)
			}
			if w.failed {
				t.Fatalf("the body was not read past %d bytes while the first buffer was being written", tc.ahead)
			}
		})
	}
}

// A plain body goes out in writes of a whole big buffer, not of the
// 256 KiB an encrypted one uses.
func TestCopyBodyLargeWrites(t *testing.T) {
	data := make([]byte, 5*bigBufSize+100)
	w := &sizesWriter{}
	n, err := newCopyServer().copyBody(w, bytes.NewReader(data), int64(len(data)), false)
	if err != nil || n != int64(len(data)) {
		t.Fatalf("copied %d of %d bytes, err %v", n, len(data), err)
	}
	for i, sz := range w.sizes[:len(w.sizes)-1] {
		if sz != bigBufSize {
			t.Fatalf("write %d of %d: %d bytes, want %d", i, len(w.sizes), sz, bigBufSize)
		}
	}
}

type sizesWriter struct{ sizes []int }

func (w *sizesWriter) Write(p []byte) (int, error) {
	w.sizes = append(w.sizes, len(p))
	return len(p), nil
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
	for _, sealed := range []bool{true, false} {
		for _, size := range []int64{2 << 20, 8 << 20} {
			n, err := s.copyBody(io.Discard, &failingReader{left: 700 << 10}, size, sealed)
			if err == nil || n != 700<<10 {
				t.Fatalf("sealed %v, %d bytes, a failing body: copied %d, err %v", sealed, size, n, err)
			}
			buf := int64(bigBufSize)
			if sealed {
				buf = copyBufSize
			}
			n, err = s.copyBody(&failingWriter{}, struct{ io.Reader }{bytes.NewReader(make([]byte, size))}, size, sealed)
			if err == nil || n != buf {
				t.Fatalf("sealed %v, %d bytes, a failing writer: copied %d, err %v", sealed, size, n, err)
			}
		}
	}
}
