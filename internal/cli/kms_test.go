package cli

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/sse"
)

func runKMS(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	root := newRootCommand()
	var out bytes.Buffer
	root.SetArgs(append([]string{"kms"}, args...))
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.Execute()
	return out.String(), err
}

// TestKMSCommands: the first command generates the master key; keys are
// created, listed, disabled and enabled; a master key from the environment
// that is not the one the keys were made with is refused.
func TestKMSCommands(t *testing.T) {
	t.Setenv(masterKeyEnv, "")
	dir := t.TempDir()
	out, err := runKMS(t, nil, "create", "--dir", dir, "--alias", "photos", "--description", "for photos")
	if err != nil || !strings.Contains(out, `"alias": "alias/photos"`) || !strings.Contains(out, "generated and stored in") {
		t.Fatalf("create: %v\n%s", err, out)
	}
	if st, err := os.Stat(filepath.Join(dir, "kms", "master.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("master key: %v", err)
	}
	if out, err = runKMS(t, nil, "disable", "--dir", dir, "alias/photos"); err != nil || !strings.Contains(out, `"enabled": false`) {
		t.Fatalf("disable: %v\n%s", err, out)
	}
	if out, err = runKMS(t, nil, "list", "--dir", dir); err != nil || !strings.Contains(out, "alias/photos") || !strings.Contains(out, "Disabled") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	if out, err = runKMS(t, nil, "enable", "--dir", dir, "alias/photos"); err != nil || !strings.Contains(out, `"enabled": true`) {
		t.Fatalf("enable: %v\n%s", err, out)
	}
	if _, err = runKMS(t, nil, "describe", "--dir", dir, "alias/nothing"); err == nil {
		t.Fatal("describe of a missing key succeeded")
	}
	other := base64.StdEncoding.EncodeToString(sse.NewKey())
	if out, err = runKMS(t, []string{masterKeyEnv + "=" + other}, "list", "--dir", dir); err == nil {
		t.Fatalf("another master key was accepted:\n%s", out)
	}
}
