package master

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/security/tlstest"
	"github.com/kelpfs/kelp/internal/testutil"
)

// TestFastAssignWithAccessTokens: with access tokens the fast path still
// serves the assigns, through the access middleware: no token, an unknown
// one and a read-only one are refused, a read-write one is served, each
// answer byte for byte net/http's.
func TestFastAssignWithAccessTokens(t *testing.T) {
	writer, viewer := auth.NewToken(), auth.NewToken()
	access, err := auth.NewAccess("", auth.NewSigner("signing-key-fast-assign", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	access.Add(writer, "writer", auth.RoleWrite)
	access.Add(viewer, "viewer", auth.RoleRead)
	s, ref := startFastMasterWith(t, writer, func(c *Config) { c.Access = access })
	get := func(extra string) string {
		return "GET /dir/assign HTTP/1.1\r\nHost: kelp.test\r\n" + extra + "\r\n"
	}
	for _, tc := range []struct {
		name, req, status string
	}{
		{"no token", get(""), "401"},
		{"unknown token", get("Authorization: Bearer " + auth.NewToken() + "\r\n"), "401"},
		{"read-only token", get("Authorization: Bearer " + viewer + "\r\n"), "403"},
		{"read-write token", get("Authorization: Bearer " + writer + "\r\n"), "200"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n0 := s.fast.served.Load()
			fast := normalizeAssign(rawAssign(t, s.HTTPAddr(), tc.req, false))
			served := s.fast.served.Load() - n0
			slow := normalizeAssign(rawAssign(t, ref, tc.req, false))
			if !bytes.Equal(fast, slow) {
				t.Errorf("fast path: %q\nnet/http:  %q", fast, slow)
			}
			if !bytes.HasPrefix(fast, []byte("HTTP/1.1 "+tc.status+" ")) {
				t.Errorf("answer %q, want %s", fast, tc.status)
			}
			if served != 1 {
				t.Errorf("the fast path answered %d requests, want 1", served)
			}
		})
	}
}

// TestFastAssignOverTLS: under TLS the fast path reads the TLS connection,
// and a client certificate is an identity to the access middleware, both
// for an assign it serves and for a request it hands to net/http; a plain
// HTTP request to the TLS port gets net/http's 400.
func TestFastAssignOverTLS(t *testing.T) {
	_, tl := tlstest.Use(t)
	access, err := auth.NewAccess("", auth.NewSigner("signing-key-fast-tls", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	s := startMaster(t, t.TempDir(), func(c *Config) { c.Access = access })
	if s.fast == nil {
		t.Fatal("the fast assign path is off under TLS")
	}
	withCert := tl.ClientConfig()
	withCert.ServerName = "127.0.0.1"
	noCert := withCert.Clone()
	noCert.GetClientCertificate = nil
	// ask sends req on a TLS connection and returns the answer's status
	// (no volume server: an authenticated assign fails, but not with 401).
	ask := func(cfg *tls.Config, req string) int {
		t.Helper()
		c, err := tls.Dial("tcp", s.HTTPAddr(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		io.WriteString(c, req)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	plain := "GET /dir/assign HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
	other := "GET /dir/assign HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Not-Fast: 1\r\n\r\n" // handed to net/http
	served, handed := s.fast.served.Load(), s.fast.handed.Load()
	if st := ask(withCert, plain); st == http.StatusUnauthorized {
		t.Error("an assign with a client certificate: 401")
	}
	if st := ask(noCert, plain); st != http.StatusUnauthorized {
		t.Errorf("an assign without a client certificate: %d, want 401", st)
	}
	if n := s.fast.served.Load() - served; n != 2 {
		t.Errorf("the fast path answered %d assigns, want 2", n)
	}
	if st := ask(withCert, other); st == http.StatusUnauthorized {
		t.Error("a request handed to net/http lost the client certificate: 401")
	}
	// Counted once net/http took the connection, which may be after its answer.
	testutil.Eventually(5*time.Second, func() bool { return s.fast.handed.Load()-handed >= 1 })
	if n := s.fast.handed.Load() - handed; n != 1 {
		t.Errorf("%d connections handed to net/http, want 1", n)
	}

	c, err := net.Dial("tcp", s.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(c, plain)
	b, _ := io.ReadAll(c)
	if !strings.HasPrefix(string(b), "HTTP/1.0 400 ") || !strings.Contains(string(b), "HTTPS") {
		t.Errorf("plain HTTP to the TLS port: %q", b)
	}
}
