package httpserve

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/testutil"
)

// serve runs New(h) on loopback until the test ends; it returns the base
// URL and the error-level log.
func serve(t *testing.T, h http.HandlerFunc) (string, *testutil.Buffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &testutil.Buffer{}
	s := New(h, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelError})))
	go s.Serve(ln)
	t.Cleanup(func() { s.Stop(time.Second) })
	return "http://" + ln.Addr().String(), logs
}

// panicky panics in the ways a handler can.
func panicky(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/panic":
		var m map[string]int
		m["boom"]++ // a nil map: the kind of bug this is for
	case "/late":
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "half an answer")
		w.(http.Flusher).Flush()
		panic("after the header")
	case "/abort":
		io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	default:
		io.WriteString(w, "fine")
	}
}

// A handler that panics gets a 500 and an error-level log with the stack,
// and the server goes on serving.
func TestPanicIsLogged500(t *testing.T) {
	base, logs := serve(t, panicky)
	resp, err := http.Get(base + "/panic")
	if err != nil {
		t.Fatalf("the panic cost the answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("status %d %q, want 500", resp.StatusCode, body)
	}
	log := logs.String()
	for _, want := range []string{"level=ERROR", "handler panicked", "path=/panic", "assignment to entry in nil map", "recover_test.go"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	resp, err = http.Get(base + "/ok")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "fine" {
		t.Fatalf("after the panic: %d %q", resp.StatusCode, body)
	}
}

// A handler that panics after its answer began cannot send a 500: the
// connection is cut, so the client sees a failed transfer, not a short
// body it could take for whole. The panic is still logged.
func TestPanicAfterHeaderCutsTheConnection(t *testing.T) {
	base, logs := serve(t, panicky)
	resp, err := http.Get(base + "/late")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		t.Fatalf("read %q in full (status %d), want a failed transfer", body, resp.StatusCode)
	}
	if !strings.Contains(logs.String(), "after the header") {
		t.Errorf("panic not logged:\n%s", logs)
	}
}

// http.ErrAbortHandler still aborts the response quietly: it is how a
// handler cuts a transfer it cannot finish, not a crash.
func TestAbortHandlerIsNoCrash(t *testing.T) {
	base, logs := serve(t, panicky)
	resp, err := http.Get(base + "/abort")
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		t.Fatal("the aborted transfer read as complete")
	}
	if l := logs.String(); l != "" {
		t.Errorf("an abort was logged as an error:\n%s", l)
	}
}
