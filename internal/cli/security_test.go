package cli

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/security"
)

// TestCertsAndSecurityConfig: `kelp certs` makes a CA and certificates; a
// security configuration file naming them turns TLS on for a command (here
// `kelp health`, which then speaks https); unknown keys are refused by name.
func TestCertsAndSecurityConfig(t *testing.T) {
	t.Cleanup(func() { security.SetProcess(nil) })
	dir := t.TempDir()
	run := func(args ...string) (string, error) {
		root := newRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(args)
		err := root.Execute()
		return out.String(), err
	}
	out, err := run("certs", "--dir", dir, "--hosts", "127.0.0.1,node-2.example")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca.crt", "ca.key", "127.0.0.1.crt", "127.0.0.1.key", "node-2.example.crt", "client.crt", "client.key"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("kelp certs wrote no %s: %v\n%s", f, err, out)
		}
	}
	tl, err := security.Load(security.Files{Cert: filepath.Join(dir, "127.0.0.1.crt"), Key: filepath.Join(dir, "127.0.0.1.key"), CA: filepath.Join(dir, "ca.crt")})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			http.Error(w, "no client certificate", http.StatusUnauthorized)
		}
	})}
	go srv.Serve(tl.Listen(ln, security.ClusterHTTP))
	defer srv.Close()
	cfg := filepath.Join(dir, "security.toml")
	// The sample printed by `kelp certs` is a valid configuration file.
	sample := out[strings.Index(out, "# Kelp security"):]
	if err := os.WriteFile(cfg, []byte(sample), 0o600); err != nil {
		t.Fatal(err)
	}
	url := ln.Addr().String() + "/healthz"
	if _, err := run("health", "--security.config="+cfg, url); err != nil {
		t.Fatalf("health over TLS with the configuration file: %v", err)
	}
	if _, err := run("health", url); err == nil {
		t.Fatal("plain HTTP to a TLS port answered 2xx")
	}
	yml := filepath.Join(dir, "security.yaml")
	os.WriteFile(yml, []byte("tls:\n  cert: "+filepath.Join(dir, "client.crt")+"\n  key: "+filepath.Join(dir, "client.key")+"\n  ca: "+filepath.Join(dir, "ca.crt")+"\n"), 0o600)
	if _, err := run("health", "--security.config="+yml, url); err != nil {
		t.Fatalf("health over TLS with a YAML configuration and the client certificate: %v", err)
	}
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte("[tls]\ncertfile = \"x\"\n"), 0o600)
	if _, err := run("health", "--security.config="+bad, url); err == nil || !strings.Contains(err.Error(), `"tls.certfile"`) {
		t.Fatalf("unknown key: err %v", err)
	}
}
