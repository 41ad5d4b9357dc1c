package tlstest

import (
	"path/filepath"
	"testing"

	"github.com/kelpfs/kelp/internal/security"
)

// Use makes a CA and a certificate for 127.0.0.1 in a new directory and
// turns TLS on for the process until the test ends. A test that uses it
// must not run in parallel with others of its binary.
func Use(tb testing.TB) (dir string, tl *security.TLS) {
	tb.Helper()
	dir = tb.TempDir()
	if _, err := security.CertsFor(dir, []string{"127.0.0.1"}); err != nil {
		tb.Fatal(err)
	}
	tl, err := security.Load(security.Files{Cert: filepath.Join(dir, "127.0.0.1.crt"), Key: filepath.Join(dir, "127.0.0.1.key"), CA: filepath.Join(dir, "ca.crt")})
	if err != nil {
		tb.Fatal(err)
	}
	security.SetProcess(tl)
	tb.Cleanup(func() { security.SetProcess(nil) })
	return dir, tl
}
