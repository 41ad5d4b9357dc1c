package cli

import (
	"bytes"
	"strings"
	"testing"
)

func TestAdminCredentials(t *testing.T) {
	t.Setenv("KELP_ADMIN_USER", "")
	t.Setenv("KELP_ADMIN_PASSWORD", "")
	var out bytes.Buffer
	// kelp master without any: none here (the first leader generates one, internal/master).
	if _, _, ok, err := (&adminFlags{}).credentials("", &out); ok || err != nil {
		t.Fatalf("no credentials on kelp master: ok %v err %v, want the UI off", ok, err)
	}
	// Flags; a password alone means the user admin.
	if u, p, ok, _ := (&adminFlags{password: "pw"}).credentials("", &out); !ok || u != "admin" || p != "pw" {
		t.Fatalf("--admin.password alone: %q %q %v", u, p, ok)
	}
	if _, _, _, err := (&adminFlags{user: "root"}).credentials("", &out); err == nil {
		t.Fatalf("a user without a password was accepted")
	}
	// The environment.
	t.Setenv("KELP_ADMIN_USER", "ops")
	t.Setenv("KELP_ADMIN_PASSWORD", "envpw")
	if u, p, ok, _ := (&adminFlags{}).credentials("", &out); !ok || u != "ops" || p != "envpw" {
		t.Fatalf("environment: %q %q %v", u, p, ok)
	}
	t.Setenv("KELP_ADMIN_USER", "")
	t.Setenv("KELP_ADMIN_PASSWORD", "")
	// kelp server: generated once, printed, then reused.
	dir := t.TempDir()
	u1, p1, ok, err := (&adminFlags{}).credentials(dir, &out)
	if err != nil || !ok || u1 != "admin" || len(p1) < 16 || !strings.Contains(out.String(), p1) {
		t.Fatalf("generated: %q %q %v %v; printed %q", u1, p1, ok, err, out.String())
	}
	u2, p2, _, err := (&adminFlags{}).credentials(dir, &out)
	if err != nil || u2 != u1 || p2 != p1 {
		t.Fatalf("second start: %q %q %v, want the stored pair", u2, p2, err)
	}
}
