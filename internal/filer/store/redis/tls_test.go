package redis

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/security"
)

type tlsPeer struct {
	cn  string
	err error
}

// fakeTLSRedis completes a real TLS handshake on loopback demanding a
// client certificate of the CA in dir, with dir's certificate for
// 127.0.0.1, and then hangs up: it speaks no RESP (no Redis server is
// installed for the tests; see TestOpenUsesProcessTLS).
func fakeTLSRedis(t *testing.T, dir string) (string, <-chan tlsPeer) {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "127.0.0.1.crt"), filepath.Join(dir, "127.0.0.1.key"))
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	peers := make(chan tlsPeer, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})
				if err := tc.Handshake(); err != nil {
					select {
					case peers <- tlsPeer{err: err}:
					default:
					}
					return
				}
				select {
				case peers <- tlsPeer{cn: tc.ConnectionState().VerifiedChains[0][0].Subject.CommonName}:
				default:
				}
			}()
		}
	}()
	return ln.Addr().String(), peers
}

// TestOpenUsesProcessTLS: a rediss:// URL gets this process's --tls.ca to
// verify the server and its certificate as client certificate: a server
// demanding a client certificate of the cluster CA completes the
// handshake. Without the process's TLS the same URL fails it.
func TestOpenUsesProcessTLS(t *testing.T) {
	dir := t.TempDir()
	if _, err := security.CertsFor(dir, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	tl, err := security.Load(security.Files{Cert: filepath.Join(dir, "client.crt"), Key: filepath.Join(dir, "client.key"), CA: filepath.Join(dir, "ca.crt")})
	if err != nil {
		t.Fatal(err)
	}
	open := func() tlsPeer {
		t.Helper()
		addr, peers := fakeTLSRedis(t, dir)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := Open(ctx, "rediss://"+addr+"/0?max_retries=-1", nil); err == nil {
			t.Fatal("Open succeeded against a server that speaks no RESP")
		}
		select {
		case p := <-peers:
			return p
		case <-ctx.Done():
			t.Fatal("no connection reached the server")
		}
		return tlsPeer{}
	}
	security.SetProcess(tl)
	t.Cleanup(func() { security.SetProcess(nil) })
	if p := open(); p.err != nil || p.cn != "client" {
		t.Errorf("the server saw client %q (handshake error %v), want the verified client certificate \"client\"", p.cn, p.err)
	}
	security.SetProcess(nil)
	if p := open(); p.err == nil {
		t.Error("without the process's TLS the handshake succeeded: the test cannot tell")
	}
}
