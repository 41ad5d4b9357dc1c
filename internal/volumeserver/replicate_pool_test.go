package volumeserver

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/client"
)

// freezingProxy forwards TCP connections to target until freeze: from then on
// the connections it already carries stay open but move no bytes (a network
// cut that leaves them half-open), while new connections work.
type freezingProxy struct {
	ln     net.Listener
	target string
	done   chan struct{} // closed at the end of the test: frozen pipes close
	mu     sync.Mutex
	frozen []chan struct{}
}

func newFreezingProxy(t *testing.T, target string) *freezingProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezingProxy{ln: ln, target: target, done: make(chan struct{})}
	t.Cleanup(func() { ln.Close(); close(p.done) })
	go p.serve()
	return p
}

func (p *freezingProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		stop := make(chan struct{})
		p.mu.Lock()
		p.frozen = append(p.frozen, stop)
		p.mu.Unlock()
		go p.pipe(c, up, stop)
		go p.pipe(up, c, stop)
	}
}

// pipe copies src to dst until stop is closed, then holds both open until
// the test ends.
func (p *freezingProxy) pipe(dst, src net.Conn, stop chan struct{}) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-stop:
			<-p.done // frozen: deliver nothing, close nothing
			dst.Close()
			src.Close()
			return
		default:
		}
		if n > 0 {
			dst.Write(buf[:n])
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

func (p *freezingProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.frozen {
		close(c)
	}
	p.frozen = nil
}

// TestReplicaTimeoutDropsStaleConnections: after a forwarded write finds a
// replica silent, the next one dials afresh instead of taking another
// half-open pooled connection and waiting out its timeout as well (the
// docker test saw 10-15 s per write after a data center came back).
func TestReplicaTimeoutDropsStaleConnections(t *testing.T) {
	replica := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
	}))
	defer replica.Close()
	proxy := newFreezingProxy(t, replica.Listener.Addr().String())
	s := &Server{http: client.NewHTTPClient()}
	forward := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+proxy.ln.Addr().String()+"/1,01?type=replicate", nil)
		if err != nil {
			t.Fatal(err)
		}
		return s.doReplica(req, http.StatusCreated)
	}
	// Several concurrent writes leave several idle connections in the pool.
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := forward(5 * time.Second); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	proxy.freeze()
	if err := forward(300 * time.Millisecond); err == nil {
		t.Fatal("a write over a frozen connection succeeded")
	}
	if err := forward(5 * time.Second); err != nil {
		t.Fatalf("the write after a silent replica took another stale connection: %v", err)
	}
}

// Under the degraded policy a write is not forwarded to a copy the master
// marks unreachable; under the strict one it is (and fails there).
func TestOtherCopiesSkipsUnreachableWhenDegraded(t *testing.T) {
	locs := []client.Location{{URL: "self:1"}, {URL: "b:1"}, {URL: "c:1", Unreachable: true}}
	if got := otherCopies(locs, "self:1", true); !slices.Equal(got, []string{"b:1"}) {
		t.Errorf("degraded: %v, want [b:1]", got)
	}
	if got := otherCopies(locs, "self:1", false); !slices.Equal(got, []string{"b:1", "c:1"}) {
		t.Errorf("strict: %v, want [b:1 c:1]", got)
	}
}
