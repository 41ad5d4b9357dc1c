package webdav

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/testutil"
)

// rcloneTreeFiles is the size of the tree rclone copies (issue 10 asks for
// 2,000 files). -short or KELP_TEST_LARGE=0 copies 200, as the S3
// workloads shrink (docs/testing.md), and so does a -race build (make test)
// unless KELP_TEST_LARGE=1: on the loaded 2-core test machine 2,000 files
// took 5.5 min under -race (400 took 2.4 min), 2 min without.
func rcloneTreeFiles() int {
	large := os.Getenv("KELP_TEST_LARGE")
	if testing.Short() || large == "0" || (raceBuild && large != "1") {
		return 200
	}
	return 2000
}

// TestWebDAVRcloneCopyCheck has rclone's WebDAV backend copy a tree of
// small files (in 20 directories, some nested) into Kelp's WebDAV, then
// `rclone check --download` compare every byte of both sides.
func TestWebDAVRcloneCopyCheck(t *testing.T) {
	if _, err := exec.LookPath("rclone"); err != nil {
		testutil.SkipOrFail(t, "rclone missing (Debian package rclone)")
	}
	s := startFilerOnly(t)
	u, _ := davServer(t, s, "/")
	c, _, _ := do(t, "MKCOL", u+"/dst", "")
	wantCode(t, "MKCOL", c, 201)

	src := t.TempDir()
	n := rcloneTreeFiles()
	for i := range n {
		dir := filepath.Join(src, fmt.Sprintf("d%02d", i%20))
		if i%40 >= 20 {
			dir = filepath.Join(dir, "sub")
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		// Sizes from 0 to ~9 KiB, contents unique per file.
		body := strings.Repeat(fmt.Sprintf("file %d;", i), i%1000)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d.txt", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	remote := ":webdav,url='" + u + "',vendor=other:dst"
	start := time.Now()
	rclone(t, "copy", src, remote, "--transfers=8", "--checkers=8")
	t.Logf("copy: %v", time.Since(start))
	start = time.Now()
	out := rclone(t, "check", src, remote, "--download", "--checkers=8")
	t.Logf("check: %v", time.Since(start))
	if want := fmt.Sprintf("%d matching files", n); !strings.Contains(out, want) {
		t.Fatalf("rclone check did not report %q:\n%s", want, out)
	}
}

// rclone runs rclone with no configuration file of the user and without
// AWS_CA_BUNDLE (which this machine sets and rclone refuses for WebDAV).
func rclone(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("rclone", append(args, "--config="+filepath.Join(t.TempDir(), "rclone.conf"), "-v")...)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "AWS_CA_BUNDLE=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rclone %s: %v\n%s", args[0], err, tail(out))
	}
	return string(out)
}

// tail is the end of a long output.
func tail(b []byte) string {
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
