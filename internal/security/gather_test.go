package security

import (
	"bytes"
	"crypto/rand"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/httpserve"
)

// countListener counts the writes of the connections it accepts.
type countListener struct {
	net.Listener
	writes atomic.Int64
}

func (l *countListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countConn{c, l}, nil
}

type countConn struct {
	net.Conn
	l *countListener
}

func (c *countConn) Write(p []byte) (int, error) {
	c.l.writes.Add(1)
	return c.Conn.Write(p)
}

// onlyReader hides bytes.Reader's WriteTo, so that io.Copy uses ReadFrom.
type onlyReader struct{ io.Reader }

// A large response over TLS leaves in a few large writes, not one per
// 16 KiB record, whether the handler writes it at once or with io.Copy
// (ReadFrom); what a write sent is on its way when it returns (the client
// reads it before the handler writes more).
func TestLargeWritesGatherRecords(t *testing.T) {
	dir := t.TempDir()
	if _, err := CertsFor(dir, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	tl, err := Load(Files{Cert: filepath.Join(dir, "127.0.0.1.crt"), Key: filepath.Join(dir, "127.0.0.1.key"), CA: filepath.Join(dir, "ca.crt")})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countListener{Listener: ln}
	body := make([]byte, 1<<20)
	rand.Read(body)
	read := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/write", func(w http.ResponseWriter, r *http.Request) { w.Write(body) })
	mux.HandleFunc("/pieces", func(w http.ResponseWriter, r *http.Request) {
		// As the S3 gateway's GET: pieces of 256 KiB.
		for b := body; len(b) > 0; b = b[256<<10:] {
			w.Write(b[:256<<10])
		}
	})
	mux.HandleFunc("/copy", func(w http.ResponseWriter, r *http.Request) { io.Copy(w, onlyReader{bytes.NewReader(body)}) })
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Write(body[:100<<10])
		w.(http.Flusher).Flush()
		select {
		case <-read:
		case <-time.After(10 * time.Second):
			return // the client did not get the first write
		}
		w.Write(body[100<<10:])
	})
	srv := httpserve.New(mux, slog.New(slog.DiscardHandler))
	go srv.Serve(tl.Listen(cl, Public))
	defer srv.Close()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tl.ClientConfig()}}
	defer hc.CloseIdleConnections()
	get := func(path string, first func()) []byte {
		t.Helper()
		resp, err := hc.Get("https://" + ln.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got []byte
		if first != nil {
			got = make([]byte, 100<<10)
			if _, err := io.ReadFull(resp.Body, got); err != nil {
				t.Fatal(err)
			}
			first()
		}
		rest, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return append(got, rest...)
	}
	get("/write", nil) // the handshake
	for path, most := range map[string]int64{"/write": 6, "/copy": 6, "/pieces": 5} {
		w0 := cl.writes.Load()
		if got := get(path, nil); !bytes.Equal(got, body) {
			t.Fatalf("%s: %d bytes, not the body", path, len(got))
		}
		// 64 records; gathered in writes of 256 KiB and the records'
		// overhead: 4 or 5 writes, one for each piece of 256 KiB.
		if n := cl.writes.Load() - w0; n > most {
			t.Errorf("%s: 1 MiB sent in %d writes, want at most %d", path, n, most)
		}
	}
	if got := get("/stream", func() { close(read) }); !bytes.Equal(got, body) {
		t.Fatalf("/stream: %d bytes, not the body", len(got))
	}
}
