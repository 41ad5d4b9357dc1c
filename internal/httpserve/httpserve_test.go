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
// shutdown; a request in progress is finished first.
func TestShutdownSkipsFreshConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	s := New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	time.Sleep(100 * time.Millisecond) // the request is in the handler
	go func() { time.Sleep(200 * time.Millisecond); close(release) }()
	start := time.Now()
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("shutdown took %v", d)
	}
	if got := <-answer; got != "done" {
		t.Fatalf("request in progress got %q", got)
	}
}
