package client

import (
	"io"
	"sync"
)

// newHandoff returns the two ends of a synchronous in-memory pipe, like
// io.Pipe, except that nothing is copied in between: Write copies into
// the reader's buffer, and ReadFrom lends its source to the reader, whose
// Reads then read it straight into the caller's buffer in the reader's own
// goroutine (a file's pread, with no goroutine switch per piece), until it
// ends. Each Read is answered by at most one piece of one Write or one
// source Read.
func newHandoff() (*handoffReader, *handoffWriter) {
	h := &handoff{
		bufs:   make(chan []byte),
		filled: make(chan int),
		srcs:   make(chan io.Reader),
		srcEnd: make(chan error, 1),
		rdone:  make(chan struct{}),
		wdone:  make(chan struct{}),
	}
	return &handoffReader{h: h}, &handoffWriter{h}
}

type handoff struct {
	bufs   chan []byte // a reader's buffer, lent to the writer
	filled chan int    // how much of it the writer filled: it gives the buffer back

	srcs   chan io.Reader // a writer's source, lent to the reader
	srcEnd chan error     // the reader is done with it: nil at its end, else its error
	mu     sync.Mutex     // held by the reader while it reads a lent source
	lent   int64          // bytes read from the lent source (under mu)

	rOnce sync.Once
	rdone chan struct{} // the reader closed
	wOnce sync.Once
	wdone chan struct{} // the writer closed, with werr
	werr  error
}

type handoffReader struct {
	h   *handoff
	src io.Reader // a source lent by ReadFrom, until it ends
}

// Read lends p to the writer and waits for it to be filled, or reads a
// source the writer lent. A piece of zero bytes (a source that returned
// none) is not reported: Read waits for the next one.
func (r *handoffReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	h := r.h
	for {
		if r.src != nil {
			n, err, closed := r.readSrc(p)
			if closed {
				return 0, io.ErrClosedPipe
			}
			if err != nil {
				if err == io.EOF {
					err = nil
				}
				r.src = nil
				h.srcEnd <- err // never blocks: one slot, one source at a time
			}
			if n > 0 {
				return n, nil
			}
			continue
		}
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
		case src := <-h.srcs:
			r.src = src
		case <-h.wdone:
			return 0, h.werr
		case <-h.rdone:
			return 0, io.ErrClosedPipe
		}
	}
}

// srcPanic carries a panic of a lent source back to ReadFrom, which
// panics with it in the handler's goroutine, as if it had read the source
// itself.
type srcPanic struct{ v any }

func (srcPanic) Error() string { return "client: source panicked" }

// readSrc reads the lent source into p unless the reader has closed.
func (r *handoffReader) readSrc(p []byte) (n int, err error, closed bool) {
	h := r.h
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.rdone:
		return 0, nil, true
	default:
	}
	defer func() {
		if v := recover(); v != nil {
			n, err = 0, srcPanic{v}
		}
	}()
	n, err = r.src.Read(p)
	h.lent += int64(n)
	return n, err, false
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

// ReadFrom lends src to the reader, which reads it in its own Reads, and
// returns when src has ended (nil error) or failed, or the reader closed;
// src is not read once ReadFrom has returned.
func (w *handoffWriter) ReadFrom(src io.Reader) (int64, error) {
	h := w.h
	select {
	case h.srcs <- src:
	case <-h.rdone:
		return 0, io.ErrClosedPipe
	}
	var err error
	select {
	case err = <-h.srcEnd:
	case <-h.rdone:
		err = io.ErrClosedPipe
	}
	h.mu.Lock() // wait out a Read of src the reader may be in
	n := h.lent
	h.lent = 0
	h.mu.Unlock()
	if p, ok := err.(srcPanic); ok {
		panic(p.v)
	}
	return n, err
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
