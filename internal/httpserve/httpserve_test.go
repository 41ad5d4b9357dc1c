package httpserve

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
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
