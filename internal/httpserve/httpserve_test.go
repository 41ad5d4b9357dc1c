package httpserve

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"
)

// A client connection that never sent a request does not hold up the
// shutdown (it is closed at once); a request in progress is finished first.
func TestShutdownSkipsFreshConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	s := New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		io.WriteString(w, "done")
	}), slog.New(slog.DiscardHandler))
	go s.Serve(ln)

	spare, err := net.Dial("tcp", ln.Addr().String()) // a client's spare connection
	if err != nil {
		t.Fatal(err)
	}
	defer spare.Close()
	answer := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String())
		if err != nil {
			answer <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answer <- string(b)
	}()
	<-entered // the request is in the handler
	stopped := make(chan error, 1)
	go func() { stopped <- s.Shutdown(context.Background()) }()

	// The spare connection is closed by the server right away, not after
	// net/http's five seconds for connections that never sent a request.
	spare.SetReadDeadline(time.Now().Add(4 * time.Second))
	if _, err := spare.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("spare connection during shutdown: %v, want EOF", err)
	}
	select {
	case err := <-stopped:
		t.Fatalf("shutdown returned (%v) with a request in progress", err)
	default:
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if got := <-answer; got != "done" {
		t.Fatalf("request in progress got %q", got)
	}
}

// writeCounter counts the writes of the connections a listener accepts.
type writeCounter struct {
	net.Listener
	writes atomic.Int64
}

func (l *writeCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countedConn{c, l}, nil
}

type countedConn struct {
	net.Conn
	l *writeCounter
}

func (c *countedConn) Write(p []byte) (int, error) {
	c.l.writes.Add(1)
	return c.Conn.Write(p)
}

// A handler's io.Copy from a reader that is not a file (a volume server's
// needle) leaves in 256 KiB writes, not net/http's 32 KiB.
func TestReadFromCopiesInLargeWrites(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wc := &writeCounter{Listener: ln}
	body := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	s := New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		io.Copy(w, struct{ io.Reader }{bytes.NewReader(body)})
	}), slog.New(slog.DiscardHandler))
	go s.Serve(wc)
	defer s.Close()
	resp, err := http.Get("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("%d bytes, err %v", len(got), err)
	}
	if n := wc.writes.Load(); n > 8 {
		t.Fatalf("1 MiB sent in %d writes", n)
	}
}

// readFromRecorder is a ResponseWriter with a ReadFrom of its own, as
// client.Loopback's pipe has.
type readFromRecorder struct {
	http.ResponseWriter
	readFrom bool
	n        int64
}

func (w *readFromRecorder) ReadFrom(r io.Reader) (int64, error) {
	w.readFrom = true
	n, err := io.Copy(io.Discard, r)
	w.n += n
	return n, err
}

type countGatherer struct{ gathers int }

func (g *countGatherer) Gather()        { g.gathers++ }
func (g *countGatherer) Release() error { return nil }

// A request handed to a server's handler in process carries the context
// of another server's request (its connection, its Gatherer): the handler's
// ReadFrom reaches the given ResponseWriter's, and nothing is gathered on
// the other server's connection.
func TestInProcessRequestKeepsReadFrom(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	other := New(http.NotFoundHandler(), log)
	g := &countGatherer{}
	s := New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(w, struct{ io.Reader }{bytes.NewReader(make([]byte, 1<<20))})
		w.Write(make([]byte, 100<<10))
	}), log)
	ctx := context.WithValue(context.Background(), connKey{}, &connInfo{srv: other, g: g})
	req, _ := http.NewRequestWithContext(ctx, "GET", "/", nil)
	rec := &readFromRecorder{ResponseWriter: httptest.NewRecorder()}
	s.Handler.ServeHTTP(rec, req)
	if !rec.readFrom || rec.n != 1<<20 || g.gathers != 0 {
		t.Fatalf("ReadFrom reached: %v (%d bytes), gathers on the other connection: %d", rec.readFrom, rec.n, g.gathers)
	}
}

// HeldStatus keeps the status until the first bytes are read, then leaves
// the rest of the body to the wrapped writer's ReadFrom.
func TestHeldStatusReadFrom(t *testing.T) {
	body := strings.Repeat("x", 3*heldPeek)
	out := httptest.NewRecorder()
	rec := &readFromRecorder{ResponseWriter: out}
	h := Hold(rec)
	h.WriteHeader(http.StatusPartialContent)
	if n, err := h.ReadFrom(strings.NewReader(body)); err != nil || n != int64(len(body)) {
		t.Fatalf("ReadFrom: %d %v", n, err)
	}
	if out.Code != http.StatusPartialContent || out.Body.Len() != heldPeek || !rec.readFrom || rec.n != 2*heldPeek || !h.Sent() {
		t.Fatalf("code %d, %d bytes written, ReadFrom %v with %d bytes, sent %v", out.Code, out.Body.Len(), rec.readFrom, rec.n, h.Sent())
	}

	out = httptest.NewRecorder()
	h = Hold(out)
	h.WriteHeader(http.StatusOK)
	boom := errors.New("first chunk unreadable")
	if _, err := h.ReadFrom(iotest.ErrReader(boom)); err != boom {
		t.Fatalf("ReadFrom of a failing reader: %v", err)
	}
	if h.Sent() || out.Body.Len() != 0 {
		t.Fatalf("a failed first read sent the status (sent %v, %d bytes)", h.Sent(), out.Body.Len())
	}
}
