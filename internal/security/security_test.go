package security

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestCertificateReload: the certificate files are replaced while a server
// runs; the next connection sees the new certificate, with no restart.
func TestCertificateReload(t *testing.T) {
	dir := t.TempDir()
	if _, err := CertsFor(dir, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "127.0.0.1.crt"), filepath.Join(dir, "127.0.0.1.key")
	tl, err := Load(Files{Cert: certFile, Key: keyFile, CA: filepath.Join(dir, "ca.crt")})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}
	go srv.Serve(tl.Listen(ln, ClusterHTTP))
	defer srv.Close()
	serial := func() string {
		t.Helper()
		conn, err := tls.Dial("tcp", ln.Addr().String(), tl.ClientConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := conn.Handshake(); err != nil {
			t.Fatal(err)
		}
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	first := serial()
	if again := serial(); again != first {
		t.Fatalf("certificate changed without a rotation: %s then %s", first, again)
	}
	ca, _, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Issue(certFile, keyFile, "rotated", []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	if second := serial(); second == first {
		t.Fatal("a new connection still sees the old certificate after the files were replaced")
	}
	// A broken pair (a key that does not match) keeps the last good one.
	if err := os.WriteFile(keyFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	serial()
}

// TestClientCertificateModes: the CA's client certificates are required on
// Peer ports, optional on ClusterHTTP ports, not asked for on Public ones;
// one from another CA is refused where asked for.
func TestClientCertificateModes(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	for _, d := range []string{dir, other} {
		if _, err := CertsFor(d, []string{"127.0.0.1"}); err != nil {
			t.Fatal(err)
		}
	}
	tl, err := Load(Files{Cert: filepath.Join(dir, "127.0.0.1.crt"), Key: filepath.Join(dir, "127.0.0.1.key"), CA: filepath.Join(dir, "ca.crt")})
	if err != nil {
		t.Fatal(err)
	}
	rogueCert, err := tls.LoadX509KeyPair(filepath.Join(other, "client.crt"), filepath.Join(other, "client.key"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	b, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	pool.AppendCertsFromPEM(b)
	clients := map[string]*tls.Config{
		"own":   tl.ClientConfig(),
		"none":  {RootCAs: pool},
		"rogue": {RootCAs: pool, Certificates: []tls.Certificate{rogueCert}},
	}
	want := map[Mode]map[string]bool{
		Peer:        {"own": true, "none": false, "rogue": false},
		ClusterHTTP: {"own": true, "none": true, "rogue": false},
		Public:      {"own": true, "none": true, "rogue": true},
	}
	for mode, cases := range want {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}
		go srv.Serve(tl.Listen(ln, mode))
		for name, ok := range cases {
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: clients[name]}}
			resp, err := hc.Get("https://" + ln.Addr().String() + "/")
			if err == nil {
				resp.Body.Close()
			}
			if (err == nil) != ok {
				t.Errorf("mode %d, client certificate %s: err %v, want success %v", mode, name, err, ok)
			}
		}
		srv.Close()
	}
}

func testFlags() (*pflag.FlagSet, map[string]*string) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	v := map[string]*string{}
	for _, n := range []string{"tls.cert", "tls.key", "tls.ca", "jwt.signing.key", "masters"} {
		v[n] = fs.String(n, "", "")
	}
	fs.String(ConfigFlag, "", "")
	fs.Int("port", 1, "")
	return fs, v
}

func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	toml := write("s.toml", "masters = [\"a:1\", \"b:2\"]\nport = 7\n[tls]\ncert = \"c.pem\"\nkey = \"k.pem\"\n[jwt.signing]\nkey = \"secret\"\n")
	yml := write("s.yaml", "tls:\n  cert: c.pem\n  key: k.pem\njwt.signing.key: secret\nmasters: [a:1, b:2]\nport: 7\n")
	for _, p := range []string{toml, yml} {
		fs, v := testFlags()
		if err := fs.Parse([]string{"--tls.key=cmdline.pem"}); err != nil {
			t.Fatal(err)
		}
		if err := ApplyConfigFile(p, fs); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		port, _ := fs.GetInt("port")
		if *v["tls.cert"] != "c.pem" || *v["tls.key"] != "cmdline.pem" || *v["jwt.signing.key"] != "secret" || *v["masters"] != "a:1,b:2" || port != 7 {
			t.Fatalf("%s: flags %v port %d", p, map[string]string{"cert": *v["tls.cert"], "key": *v["tls.key"], "jwt": *v["jwt.signing.key"], "masters": *v["masters"]}, port)
		}
	}
	for text, want := range map[string]string{
		"[tls]\ncertificate = \"x\"\n": `"tls.certificate"`,
		"port = \"many\"\n":            `"port"`,
		"security.config = \"x\"\n":    `"security.config"`,
		"[tls\n":                       "s.toml",
	} {
		fs, _ := testFlags()
		err := ApplyConfigFile(write("s.toml", text), fs)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("config %q: error %v, want one naming %s", text, err, want)
		}
	}
	fs, _ := testFlags()
	if err := ApplyConfigFile(filepath.Join(dir, "missing.toml"), fs); err == nil {
		t.Error("a missing file was accepted")
	}
}

// TestEnsureSecure: generated on the first call, reused on the next, and
// issued again (same CA) when a new host must be named.
func TestEnsureSecure(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "security")
	s, err := EnsureSecure(dir, []string{"127.0.0.1", "myhost"})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Created) != 5 {
		t.Fatalf("first start created %v", s.Created)
	}
	if _, err := Load(s.Files); err != nil {
		t.Fatal(err)
	}
	s2, err := EnsureSecure(dir, []string{"127.0.0.1", "myhost"})
	if err != nil || len(s2.Created) != 0 {
		t.Fatalf("second start: created %v, err %v", s2.Created, err)
	}
	s3, err := EnsureSecure(dir, []string{"10.1.2.3"})
	if err != nil || len(s3.Created) != 2 {
		t.Fatalf("new host: created %v, err %v", s3.Created, err)
	}
	ca, created, err := LoadOrCreateCA(dir)
	if err != nil || created || !ca.covers(s3.Files.Cert, []string{"10.1.2.3", "localhost", "127.0.0.1"}) {
		t.Fatalf("reissued certificate: created CA %v, err %v", created, err)
	}
}
