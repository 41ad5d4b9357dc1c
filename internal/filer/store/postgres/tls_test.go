package postgres

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/security"
)

// tlsPeer is what a TLS server on loopback saw of one client: the common
// name of its verified client certificate, or the handshake's error.
type tlsPeer struct {
	cn  string
	err error
}

// fakeTLSPostgres answers a PostgreSQL SSLRequest with 'S' and then
// completes a real TLS handshake demanding a client certificate signed by
// the CA in dir, with the server certificate for 127.0.0.1 of dir. It
// speaks no further protocol: the test looks at the handshake only (no
// PostgreSQL server with TLS is available to the tests; see
// TestOpenUsesProcessTLS).
func fakeTLSPostgres(t *testing.T, dir string) (string, <-chan tlsPeer) {
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
				var req [8]byte
				if _, err := io.ReadFull(c, req[:]); err != nil {
					peers <- tlsPeer{err: err}
					return
				}
				if binary.BigEndian.Uint32(req[4:]) != 80877103 {
					peers <- tlsPeer{err: fmt.Errorf("not an SSLRequest: %x", req)}
					return
				}
				c.Write([]byte{'S'})
				tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})
				if err := tc.Handshake(); err != nil {
					peers <- tlsPeer{err: err}
					return
				}
				peers <- tlsPeer{cn: tc.ConnectionState().VerifiedChains[0][0].Subject.CommonName}
			}()
		}
	}()
	return ln.Addr().String(), peers
}

// TestOpenUsesProcessTLS: a DSN asking for TLS (sslmode=verify-full,
// verify-ca, require) gets this process's --tls.ca to verify the server
// and its certificate as client certificate: a server demanding a client
// certificate of the cluster CA completes the handshake. Without the
// process's TLS the same DSN fails it (the server's CA is unknown to the
// system roots, and no client certificate is sent).
func TestOpenUsesProcessTLS(t *testing.T) {
	dir := t.TempDir()
	if _, err := security.CertsFor(dir, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	tl, err := security.Load(security.Files{Cert: filepath.Join(dir, "client.crt"), Key: filepath.Join(dir, "client.key"), CA: filepath.Join(dir, "ca.crt")})
	if err != nil {
		t.Fatal(err)
	}
	open := func(dsn string) tlsPeer {
		t.Helper()
		addr, peers := fakeTLSPostgres(t, dir)
		host, port, _ := net.SplitHostPort(addr)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := Open(ctx, fmt.Sprintf(dsn, host, port), nil)
		if err == nil {
			t.Fatal("Open succeeded against a server that speaks no PostgreSQL")
		}
		select {
		case p := <-peers:
			return p
		case <-ctx.Done():
			t.Fatalf("no connection reached the server: %v", err)
		}
		return tlsPeer{}
	}
	security.SetProcess(tl)
	t.Cleanup(func() { security.SetProcess(nil) })
	for _, dsn := range []string{
		"postgres://kelp@%s:%s/kelp?sslmode=verify-full&connect_timeout=5",
		"host=%s port=%s user=kelp dbname=kelp sslmode=verify-ca connect_timeout=5",
		"postgres://kelp@%s:%s/kelp?sslmode=require&connect_timeout=5",
	} {
		if p := open(dsn); p.err != nil || p.cn != "client" {
			t.Errorf("%s: the server saw client %q (handshake error %v), want the verified client certificate \"client\"", dsn, p.cn, p.err)
		}
	}
	// A DSN naming its own sslrootcert keeps it: a CA the server's
	// certificate does not chain to fails the handshake.
	other := t.TempDir()
	if _, err := security.CertsFor(other, nil); err != nil {
		t.Fatal(err)
	}
	if p := open("postgres://kelp@%s:%s/kelp?sslmode=verify-full&connect_timeout=5&sslrootcert=" + filepath.Join(other, "ca.crt")); p.err == nil {
		t.Error("the DSN's own sslrootcert was replaced by tls.ca")
	}
	security.SetProcess(nil)
	if p := open("postgres://kelp@%s:%s/kelp?sslmode=verify-full&connect_timeout=5"); p.err == nil {
		t.Error("without the process's TLS the handshake succeeded: the test cannot tell")
	}
}

func TestDSNHas(t *testing.T) {
	for dsn, want := range map[string]bool{
		"postgres://h/db?sslmode=verify-full&sslrootcert=/x": true,
		"postgresql://h/db?sslmode=verify-full":              false,
		"host=h sslrootcert=/x sslmode=verify-full":          true,
		"host=h sslmode=verify-full":                         false,
	} {
		if dsnHas(dsn, "sslrootcert") != want {
			t.Errorf("dsnHas(%q) = %v", dsn, !want)
		}
	}
}
