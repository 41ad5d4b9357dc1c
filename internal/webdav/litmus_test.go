package webdav

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/testutil"
)

// TestWebDAVLitmus runs litmus, the WebDAV conformance suite (Debian
// package litmus), against the server: every test of its five suites
// (basic, copymove, props, locks, http) must pass, without a warning.
func TestWebDAVLitmus(t *testing.T) {
	if _, err := exec.LookPath("litmus"); err != nil {
		testutil.SkipOrFail(t, "litmus missing (Debian package litmus)")
	}
	u, _ := startDAV(t)
	c, _, _ := do(t, "MKCOL", u+"/litmus/", "")
	wantCode(t, "MKCOL", c, 201)
	cmd := exec.Command("litmus", "-k", u+"/litmus/")
	cmd.Dir = t.TempDir() // its debug.log and child.log
	cmd.Env = append(os.Environ(), "TESTS=basic copymove props locks http")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("litmus: %v\n%s", err, out)
	}
	summaries := regexp.MustCompile(`summary for \x60(\w+)': of (\d+) tests run: (\d+) passed, (\d+) failed`).FindAllStringSubmatch(string(out), -1)
	if len(summaries) != 5 {
		t.Fatalf("litmus ran %d suites, want 5:\n%s", len(summaries), out)
	}
	for _, s := range summaries {
		if s[4] != "0" || s[2] != s[3] {
			t.Errorf("litmus %s: %s of %s passed", s[1], s[3], s[2])
		}
	}
	if strings.Contains(string(out), "WARNING") || t.Failed() {
		t.Fatalf("litmus:\n%s", out)
	}
}
