package client

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// Loopback is an http.RoundTripper that serves requests for some hosts by
// calling their handlers in this process, and sends the rest to Next.
//
// `kelp server` runs the volume server, filer and S3 gateway in one process;
// without this, every chunk the filer stores or reads crosses the loopback
// interface twice (a socket write and a socket read, each a copy through the
// kernel, plus HTTP framing on both sides). Through Loopback the handler reads
// the caller's request body directly and its response reaches the caller
// through an io.Pipe: one copy, no system call. The handler sees the same
// request it would over TCP, so nothing else changes: replication fan-out,
// errors and timeouts behave as with a remote volume server.
//
// The response body is a handoff, not a buffer: the caller's Read lends its
// buffer to the handler, whose Write copies into it, and the handler's
// io.Copy (the volume server's http.ServeContent) lends its source, the
// needle, through ReadFrom to the caller, whose Reads read it from disk
// straight into their buffers in the caller's goroutine. A large chunk thus
// costs one read from the page cache into the caller's buffer per piece as
// large as that buffer, and no goroutine switch per piece.
type Loopback struct {
	// Handlers maps "host:port", as it appears in request URLs, to the
	// handler that serves it.
	Handlers map[string]http.Handler
	// Next carries requests for every other host; nil means
	// http.DefaultTransport.
	Next http.RoundTripper
}

// ErrHandlerPanic is returned (or ends the response body) when an in-process
// handler panics.
var ErrHandlerPanic = errors.New("client: in-process handler panicked")

// RoundTrip implements http.RoundTripper.
func (l *Loopback) RoundTrip(req *http.Request) (*http.Response, error) {
	h, ok := l.Handlers[req.URL.Host]
	if !ok {
		next := l.Next
		if next == nil {
			next = http.DefaultTransport
		}
		return next.RoundTrip(req)
	}
	return serveInProcess(h, req)
}

// serveInProcess runs h on a server-side copy of req in a new goroutine and
// returns the response as soon as h has decided its status and headers.
func serveInProcess(h http.Handler, req *http.Request) (*http.Response, error) {
	body := req.Body
	if body == nil {
		body = http.NoBody
	}
	sreq := req.Clone(req.Context())
	sreq.Body = body
	sreq.RequestURI = req.URL.RequestURI()
	sreq.RemoteAddr = "127.0.0.1:0" // the same process
	sreq.Host = req.URL.Host
	sreq.Proto, sreq.ProtoMajor, sreq.ProtoMinor = "HTTP/1.1", 1, 1
	pr, pw := newHandoff()
	w := &pipeResponse{header: http.Header{}, pw: pw, head: req.Method == http.MethodHead, ready: make(chan struct{})}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer body.Close()
		defer func() {
			if p := recover(); p != nil {
				w.fail(fmt.Errorf("%w: %v", ErrHandlerPanic, p))
				return
			}
			w.WriteHeader(http.StatusOK) // no-op when the handler wrote one
			pw.Close()
		}()
		h.ServeHTTP(w, sreq)
	}()
	<-w.ready
	if w.err != nil {
		return nil, w.err
	}
	resp := &http.Response{
		Status:        strconv.Itoa(w.code) + " " + http.StatusText(w.code),
		StatusCode:    w.code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          &responseBody{handoffReader: pr, finished: finished, left: -1},
		ContentLength: -1,
		Request:       req,
	}
	if n, err := strconv.ParseInt(w.sent.Get("Content-Length"), 10, 64); err == nil && n >= 0 {
		resp.ContentLength = n
	}
	if w.code == http.StatusNoContent || w.code == http.StatusNotModified {
		resp.ContentLength = 0 // no body, whatever the headers say
	}
	if req.Method != http.MethodHead {
		resp.Body.(*responseBody).left = resp.ContentLength
	}
	return resp, nil
}

// responseBody is an in-process response body. Close waits for the handler
// to return: a handler may go on reading the request body after it answered
// (an early error), and the caller may reuse that body's buffer as soon as it
// has closed the response, as it may with a network transport, which stops
// sending the body when the answer arrives.
type responseBody struct {
	*handoffReader
	finished chan struct{}
	left     int64 // bytes the Content-Length still promises; -1: none
}

// Read reports a body shorter than its Content-Length (a handler that
// failed after sending its headers) as io.ErrUnexpectedEOF, as net/http's
// client does when a server closes the connection early.
func (b *responseBody) Read(p []byte) (int, error) {
	n, err := b.handoffReader.Read(p)
	if b.left >= 0 {
		b.left -= int64(n)
		if err == io.EOF && b.left > 0 {
			err = io.ErrUnexpectedEOF
		}
	}
	return n, err
}

func (b *responseBody) Close() error {
	err := b.handoffReader.Close() // a handler still writing fails and returns
	<-b.finished
	return err
}

// pipeResponse is the http.ResponseWriter of an in-process request: the
// status and a snapshot of the headers are handed over when the handler
// first writes, the body streams through the pipe.
type pipeResponse struct {
	header http.Header
	pw     *handoffWriter
	head   bool // a HEAD request: the body is dropped, as net/http does

	once  sync.Once
	ready chan struct{}
	code  int
	sent  http.Header
	err   error // the handler panicked before sending a status
}

func (w *pipeResponse) Header() http.Header { return w.header }

func (w *pipeResponse) WriteHeader(code int) {
	if code >= 100 && code < 200 {
		return // informational answers (100 Continue) mean nothing here
	}
	w.once.Do(func() {
		w.code = code
		w.sent = w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeResponse) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if w.head {
		return len(p), nil
	}
	return w.pw.Write(p)
}

// ReadFrom implements io.ReaderFrom: src is read straight into the
// caller's buffers, with no copy through a buffer of io.Copy's.
func (w *pipeResponse) ReadFrom(src io.Reader) (int64, error) {
	w.WriteHeader(http.StatusOK)
	if w.head {
		return io.Copy(io.Discard, src)
	}
	return w.pw.ReadFrom(src)
}

// Flush implements http.Flusher: the pipe has no buffer to flush.
func (w *pipeResponse) Flush() {}

func (w *pipeResponse) fail(err error) {
	w.once.Do(func() {
		w.err = err
		close(w.ready)
	})
	w.pw.CloseWithError(err)
}
