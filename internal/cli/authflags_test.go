package cli

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/auth"
)

// TestApplySecure: --secure's authentication part generates the signing key
// and an admin token on the first start, reuses them after, and never
// prints a secret.
func TestApplySecure(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	f := &authFlags{}
	if err := f.applySecure(dir, &out); err != nil {
		t.Fatal(err)
	}
	sec, err := f.setup()
	if err != nil {
		t.Fatal(err)
	}
	if !sec.signer.Enabled() || !sec.access.Enabled() {
		t.Fatal("--secure left signed file ids or access tokens off")
	}
	s, err := auth.LoadOrCreateSecrets(dir)
	if err != nil {
		t.Fatal(err)
	}
	if f.signingKey != "@"+s.SigningKeyFile || sec.signer.VerifyServer(auth.NewSigner(s.SigningKey, 0).ServerToken()) != nil {
		t.Error("a second start generated another signing key")
	}
	tok, err := clientToken("@" + s.AdminTokenFile)
	if err != nil || tok != s.AdminToken {
		t.Errorf("--access.token=@admin.token reads %q, %v", tok, err)
	}
	if strings.Contains(out.String(), s.AdminToken) || strings.Contains(out.String(), s.SigningKey) {
		t.Error("a secret was printed")
	}
	// Flags given explicitly win.
	g := &authFlags{signingKey: "explicit"}
	if err := g.applySecure(dir, &out); err != nil || g.signingKey != "explicit" {
		t.Errorf("explicit --jwt.signing.key replaced: %q %v", g.signingKey, err)
	}
	fi, _ := os.Stat(s.TokensFile)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("tokens file mode %v", fi.Mode().Perm())
	}
}
