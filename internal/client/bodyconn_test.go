package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// countingConn counts the writes made to a connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestBodyConnSendsABodyInMemoryInOneWrite uploads 8 MiB from a
// *bytes.Reader: it must arrive whole, in a few writes instead of one per
// 32 KiB; a body of another type must arrive whole too.
func TestBodyConnSendsABodyInMemoryInOneWrite(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		io.Copy(h, r.Body)
		got.Store(string(h.Sum(nil)))
	}))
	defer srv.Close()
	var writes atomic.Int64
	var d net.Dialer
	tr := &http.Transport{WriteBufferSize: 32 << 10, DialContext: dialBodyConns(func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		return countingConn{c, &writes}, err
	})}
	defer tr.CloseIdleConnections()
	data := bytes.Repeat([]byte("0123456789abcdef"), 8<<20/16)
	want := sha256.Sum256(data)
	for _, tc := range []struct {
		name      string
		body      io.Reader
		maxWrites int64
	}{
		{"bytes.Reader", bytes.NewReader(data), 4},
		{"other reader", io.MultiReader(bytes.NewReader(data[:1<<20]), strings.NewReader(string(data[1<<20:]))), 1 << 20},
	} {
		writes.Store(0)
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/x", requestBody(tc.body))
		req.ContentLength = int64(len(data))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		resp.Body.Close()
		if got.Load() != string(want[:]) {
			t.Fatalf("%s: the body arrived changed", tc.name)
		}
		if n := writes.Load(); n > tc.maxWrites {
			t.Fatalf("%s: %d writes for 8 MiB, want at most %d", tc.name, n, tc.maxWrites)
		}
		t.Logf("%s: %d writes", tc.name, writes.Load())
	}
}
