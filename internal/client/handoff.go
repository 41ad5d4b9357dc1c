package client

import (
	"io"
	"sync"
)

// newHandoff returns the two ends of a synchronous in-memory pipe, like
// io.Pipe, except that the writer fills the reader's buffer itself: Write
// copies into it and ReadFrom reads its source directly into it, so data
// read from a file reaches the caller's buffer with no copy in between.
// Each Read is answered by at most one piece of one Write or one source
// Read.
func newHandoff() (*handoffReader, *handoffWriter) {
	h := &handoff{
		bufs:   make(chan []byte),
		filled: make(chan int),
		rdone:  make(chan struct{}),
		wdone:  make(chan struct{}),
	}
	return &handoffReader{h}, &handoffWriter{h}
}

type handoff struct {
	bufs   chan []byte // a reader's buffer, lent to the writer
	filled chan int    // how much of it the writer filled: it gives the buffer back

	rOnce sync.Once
	rdone chan struct{} // the reader closed
	wOnce sync.Once
	wdone chan struct{} // the writer closed, with werr
	werr  error
}

type handoffReader struct{ h *handoff }

// Read lends p to the writer and waits for it to be filled. A piece of
// zero bytes (a source that returned none) is not reported: Read waits
// for the next one.
func (r *handoffReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	h := r.h
	for {
		select {
		case <-h.rdone:
			return 0, io.ErrClosedPipe
		default:
		}
		select {
		case h.bufs <- p:
			if n := <-h.filled; n > 0 {
				return n, nil
			}
		case <-h.wdone:
			return 0, h.werr
		case <-h.rdone:
			return 0, io.ErrClosedPipe
		}
	}
}

// Close makes the writer's pending and later writes fail with
// io.ErrClosedPipe.
func (r *handoffReader) Close() error {
	r.h.rOnce.Do(func() { close(r.h.rdone) })
	return nil
}

type handoffWriter struct{ h *handoff }

// Write copies b into the reader's buffers and returns when all of it
// has been read, or the reader closed.
func (w *handoffWriter) Write(b []byte) (int, error) {
	h := w.h
	written := 0
	for len(b) > 0 {
		select {
		case p := <-h.bufs:
			n := copy(p, b)
			h.filled <- n
			written += n
			b = b[n:]
		case <-h.rdone:
			return written, io.ErrClosedPipe
		}
	}
	return written, nil
}

// ReadFrom reads src into the reader's buffers until src ends (nil error)
// or fails, or the reader closes.
func (w *handoffWriter) ReadFrom(src io.Reader) (int64, error) {
	h := w.h
	var total int64
	for {
		select {
		case p := <-h.bufs:
			n, err := src.Read(p)
			h.filled <- n
			total += int64(n)
			if err == io.EOF {
				return total, nil
			}
			if err != nil {
				return total, err
			}
		case <-h.rdone:
			return total, io.ErrClosedPipe
		}
	}
}

// Close ends the stream: the reader gets io.EOF after the data written.
func (w *handoffWriter) Close() error { return w.CloseWithError(nil) }

// CloseWithError ends the stream with err (io.EOF when nil) for the reader.
func (w *handoffWriter) CloseWithError(err error) error {
	if err == nil {
		err = io.EOF
	}
	w.h.wOnce.Do(func() {
		w.h.werr = err
		close(w.h.wdone)
	})
	return nil
}
