package httpfast

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
)

// connKey is the context key of the connection a request came on.
type connKey struct{}

// RememberConns makes every request srv serves carry its connection in its
// context, for Reclaim, after what srv's own ConnContext (if any) puts there.
func RememberConns(srv *http.Server) {
	base := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if base != nil {
			ctx = base(ctx, c)
		}
		return context.WithValue(ctx, connKey{}, c)
	}
}

// Reclaim wraps next, the handler of the http.Server behind l: a request
// net/http serves on a connection the fast path handed over (a
// *PrefixConn, see RememberConns) that takes says the fast path would have
// taken, once answered whole, gives its connection back to serve with the
// bytes net/http had read past it. Clients keep their connections for all
// kinds of requests; without this a connection stayed net/http's for good
// after the first request the fast path did not take.
//
// Only a plain HTTP/1.1 GET without a body or a Connection header, whose
// answer carried a Content-Length and that many bytes, is taken back:
// net/http then has nothing of the exchange left to finish.
func Reclaim(next http.Handler, takes func(*http.Request) bool, serve func(*PrefixConn)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pc, _ := r.Context().Value(connKey{}).(*PrefixConn)
		if pc == nil || r.Method != http.MethodGet || r.ProtoMajor != 1 || r.ProtoMinor != 1 || r.Close ||
			r.Body != http.NoBody || r.Header.Get("Connection") != "" || !takes(r) {
			next.ServeHTTP(w, r)
			return
		}
		cw := &countWriter{ResponseWriter: w}
		next.ServeHTTP(cw, r)
		if !cw.complete() {
			return
		}
		rc := http.NewResponseController(w)
		if rc.Flush() != nil {
			return
		}
		conn, brw, err := rc.Hijack()
		if err != nil {
			return
		}
		if conn != net.Conn(pc) {
			conn.Close() // cannot happen: pc is this request's connection
			return
		}
		b, _ := brw.Reader.Peek(brw.Reader.Buffered())
		go serve(pc.Rest(b))
	})
}

// countWriter records whether an answer was sent whole: a status, a
// Content-Length and that many body bytes.
type countWriter struct {
	http.ResponseWriter
	code int
	n    int64
}

func (w *countWriter) WriteHeader(code int) {
	if w.code == 0 && code >= 200 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *countWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.n += int64(n)
	if err != nil {
		w.code = -1
	}
	return n, err
}

// ReadFrom passes a body sent from a reader (http.ServeContent's copy of a
// large needle or a range of one) on to the ReadFrom below, which sends it
// through a 256 KiB buffer (httpserve's startWriter) or the kernel: without
// it the copy went through Write 32 KiB at a time, one pread and one socket
// write per 32 KiB.
func (w *countWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	var n int64
	var err error
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(r)
	} else {
		n, err = io.Copy(w.ResponseWriter, r)
	}
	w.n += n
	if err != nil {
		w.code = -1
	}
	return n, err
}

func (w *countWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *countWriter) complete() bool {
	h := w.Header()
	if w.code < 200 || w.code == http.StatusNoContent || w.code == http.StatusNotModified || h.Get("Connection") != "" {
		return false
	}
	cl, err := strconv.ParseInt(h.Get("Content-Length"), 10, 64)
	return err == nil && cl == w.n
}
