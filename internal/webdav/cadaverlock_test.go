package webdav

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/testutil"
)

// TestWebDAVCadaverLocks has a real client (cadaver, over neon) take a
// lock, see it in lockdiscovery, write with it, and meet another
// client's lock.
func TestWebDAVCadaverLocks(t *testing.T) {
	if _, err := exec.LookPath("cadaver"); err != nil {
		testutil.SkipOrFail(t, "cadaver missing (Debian package cadaver)")
	}
	s := startFilerOnly(t)
	u, _ := davServer(t, s, "/")
	c, _, _ := do(t, "PUT", u+"/mine.txt", "v1")
	wantCode(t, "PUT", c, 201)
	c, _, _ = do(t, "PUT", u+"/theirs.txt", "v1")
	wantCode(t, "PUT", c, 201)
	other := lock(t, u+"/theirs.txt", sharedLockBody("someone-else"), "0", 200)
	dir := t.TempDir()
	src := dir + "/src.txt"
	if err := os.WriteFile(src, []byte("from cadaver"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := strings.Join([]string{"lock mine.txt", "discover mine.txt", "put " + src + " mine.txt",
		"discover theirs.txt", "put " + src + " theirs.txt", "unlock mine.txt", "quit", ""}, "\n")
	cmd := exec.Command("cadaver", u+"/")
	cmd.Stdin = strings.NewReader(script)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cadaver: %v\n%s", err, out)
	}
	for _, want := range []string{"Locking `mine.txt': succeeded", "Scope: exclusive  Type: write",
		trim(other), "Scope: shared  Type: write  Timeout: 600 seconds", "423 Locked", "Unlocking `mine.txt': succeeded"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("cadaver's output lacks %q:\n%s", want, out)
		}
	}
	if c, _, b := do(t, "GET", u+"/mine.txt", ""); c != 200 || b != "from cadaver" {
		t.Fatalf("mine.txt after cadaver's locked PUT: %d %q\n%s", c, b, out)
	}
	if c, _, b := do(t, "GET", u+"/theirs.txt", ""); c != 200 || b != "v1" {
		t.Fatalf("theirs.txt, locked by another, changed: %d %q\n%s", c, b, out)
	}
	c, _, _ = do(t, "PUT", u+"/mine.txt", "v2")
	wantCode(t, "PUT after cadaver's UNLOCK", c, 204)
}
