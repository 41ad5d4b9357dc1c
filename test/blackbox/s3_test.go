package blackbox

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/testutil"
)

// The S3 tests drive `kelp server`'s gateway with the real clients users
// run: the aws CLI, rclone and s3cmd, each with its default settings and its
// own configuration in a temporary HOME. Every transfer is checked byte for
// byte (SHA-256 of each file), not only by exit codes.
//
// A client whose command is missing fails the test, unless
// KELP_TEST_ALLOW_SKIP=1 (`make test` installs them with scripts/test-deps.sh).
// The workloads users run first, at full size (a 5,000-file tree, 200 MiB of
// 1 MiB files, a 1 GiB object), run by default: about a minute more. With
// -short or KELP_TEST_LARGE=0 they are skipped or scaled down.

const (
	s3AccessKey = "BLACKBOXACCESSKEY"
	s3SecretKey = "blackbox/secret+key=0123456789"
	s3Region    = "us-east-1"
)

// s3Server is a started `kelp server` with its S3 gateway.
type s3Server struct {
	proc     *process
	endpoint string // http://127.0.0.1:port
	hostport string
}

func startS3Server(t *testing.T) *s3Server {
	t.Helper()
	var ports serverPorts
	p := startServer(t, t.TempDir(), &ports, "--s3.access-key="+s3AccessKey, "--s3.secret-key="+s3SecretKey)
	s := &s3Server{proc: p, hostport: hostport(ports.s3)}
	s.endpoint = "http://" + s.hostport
	return s
}

// exited reports whether p's process has ended (a zombie not yet waited for).
func exited(p *process) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return true
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(rest, "Z")
}

// needTool returns the path of a client command; a missing one fails the
// test unless KELP_TEST_ALLOW_SKIP=1.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	testutil.SkipOrFail(t, "%s is not installed", name)
	return ""
}

// large reports whether the full-size workloads of issue 5 should run.
func large() bool { return !testing.Short() && os.Getenv("KELP_TEST_LARGE") != "0" }

// tool runs one client command with its own environment.
type tool struct {
	t   *testing.T
	bin string
	env []string
	dir string
}

// baseEnv is the process environment without anything that could point a
// client at another endpoint, identity or CA bundle (rclone refuses to start
// with AWS_CA_BUNDLE set), with home as HOME.
func baseEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AWS_") || strings.HasPrefix(k, "RCLONE_") || k == "HOME" ||
			strings.EqualFold(k, "http_proxy") || strings.EqualFold(k, "https_proxy") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1")
}

// result is a finished command.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout: %s\nstderr: %s", r.code, tail(r.stdout), tail(r.stderr))
}

func tail(s string) string {
	if len(s) > 3000 {
		return "..." + s[len(s)-3000:]
	}
	return s
}

// try runs the tool and returns what happened; it fails only when the
// command cannot run at all or times out.
func (c *tool) try(args ...string) result {
	c.t.Helper()
	timeout := 3 * time.Minute
	if large() {
		timeout = 15 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Env, cmd.Dir = c.env, c.dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	// At the default sizes no command needs more than a few seconds; one
	// that took a minute sat in a client's read timeout (60 s for the aws
	// CLI) and was retried: a stalled response the exit code hides.
	if d := time.Since(start); d > 45*time.Second && !large() {
		c.t.Errorf("%s %s took %.1f s: a request stalled until the client's timeout\nstderr: %s",
			filepath.Base(c.bin), strings.Join(args, " "), d.Seconds(), tail(stderr.String()))
	}
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ctx.Err() == nil:
		r.code = ee.ExitCode()
	default:
		c.t.Fatalf("%s %s: %v\n%s", filepath.Base(c.bin), strings.Join(args, " "), err, r)
	}
	return r
}

// run runs the tool and fails the test unless it exits 0.
func (c *tool) run(args ...string) string {
	c.t.Helper()
	r := c.try(args...)
	if r.code != 0 {
		c.t.Fatalf("%s %s: %s", filepath.Base(c.bin), strings.Join(args, " "), r)
	}
	return r.stdout
}

// awsCLI is the aws CLI configured for s: path-style, us-east-1, its own
// config and credentials files.
func awsCLI(t *testing.T, s *s3Server, secret string) *tool {
	bin := needTool(t, "aws")
	home := t.TempDir()
	cfg := filepath.Join(home, "config")
	creds := filepath.Join(home, "credentials")
	writeFile(t, cfg, []byte("[default]\nregion = "+s3Region+"\ns3 =\n    addressing_style = path\n"))
	writeFile(t, creds, []byte("[default]\naws_access_key_id = "+s3AccessKey+"\naws_secret_access_key = "+secret+"\n"))
	env := append(baseEnv(home), "AWS_CONFIG_FILE="+cfg, "AWS_SHARED_CREDENTIALS_FILE="+creds,
		"AWS_EC2_METADATA_DISABLED=true", "AWS_PAGER=")
	return &tool{t: t, bin: bin, env: env, dir: home}
}

// aws runs `aws --endpoint-url ENDPOINT args...`.
func (c *tool) aws(s *s3Server, args ...string) string {
	c.t.Helper()
	return c.run(append([]string{"--endpoint-url", s.endpoint}, args...)...)
}

func (c *tool) awsTry(s *s3Server, args ...string) result {
	c.t.Helper()
	return c.try(append([]string{"--endpoint-url", s.endpoint}, args...)...)
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// randomBytes is n bytes from rng.
func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// writeRandomFile writes n random bytes to path, streaming, and returns
// their SHA-256.
func writeRandomFile(t *testing.T, path string, n int64, seed uint64) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	buf := make([]byte, 1<<20)
	for left := n; left > 0; {
		m := min(int64(len(buf)), left)
		for i := 0; i < int(m); i += 8 {
			v := rng.Uint64()
			for j := 0; j < 8 && i+j < int(m); j++ {
				buf[i+j] = byte(v >> (8 * j))
			}
		}
		if _, err := f.Write(buf[:m]); err != nil {
			t.Fatal(err)
		}
		h.Write(buf[:m])
		left -= m
	}
	return hex.EncodeToString(h.Sum(nil))
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func sameFile(t *testing.T, want, got string) {
	t.Helper()
	if a, b := fileSHA256(t, want), fileSHA256(t, got); a != b {
		t.Fatalf("%s differs from %s (sha256 %s, want %s)", got, want, b, a)
	}
}

// treeSums maps every regular file under root, by slash path, to its SHA-256.
func treeSums(t *testing.T, root string) map[string]string {
	t.Helper()
	sums := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		sums[filepath.ToSlash(rel)] = fileSHA256(t, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

func sameTree(t *testing.T, want, got string) {
	t.Helper()
	a, b := treeSums(t, want), treeSums(t, got)
	var diffs []string
	for k, v := range a {
		if b[k] != v {
			diffs = append(diffs, fmt.Sprintf("%q: got %.12s, want %.12s", k, b[k], v))
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%q: unexpected", k))
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		t.Fatalf("%s differs from %s in %d files, e.g.:\n%s", got, want, len(diffs), strings.Join(diffs[:min(10, len(diffs))], "\n"))
	}
}

// oddNames are keys users do write: spaces, '+', '%', unicode, and names
// that look like escapes.
var oddNames = []string{
	"with space.txt", "plus+sign.txt", "percent%20not-a-space.txt", "100%.txt",
	"ünïcödé-文件-🦀.txt", "a&b=c;d,e'f.txt", "tilde~hash#.txt",
}

// makeTree writes files small files of up to maxSize bytes spread over
// directories (including the odd names), plus big files of bigSize bytes;
// it returns the tree's root.
func makeTree(t *testing.T, root string, files, maxSize, big int, bigSize int64, seed uint64) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := 0; i < files; i++ {
		name := fmt.Sprintf("d%02d/sub%d/f%04d.dat", i%20, i%3, i)
		if i < len(oddNames) {
			name = fmt.Sprintf("odd dir %d/%s", i%2, oddNames[i])
		}
		writeFile(t, filepath.Join(root, name), randomBytes(rng, rng.IntN(maxSize+1)))
	}
	for i := 0; i < big; i++ {
		if err := os.MkdirAll(filepath.Join(root, "big"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeRandomFile(t, filepath.Join(root, "big", fmt.Sprintf("big%d.bin", i)), bigSize+int64(i)*12345, seed+uint64(i)+100)
	}
	writeFile(t, filepath.Join(root, "empty.txt"), nil)
	return root
}

// s3Error is the error code the aws CLI printed, e.g. "NoSuchKey".
func s3Error(r result) string {
	_, after, ok := strings.Cut(r.stderr, "An error occurred (")
	if !ok {
		return ""
	}
	code, _, _ := strings.Cut(after, ")")
	return code
}

// awsServiceError asserts the aws CLI failed with a service error (exit
// code 254 in v2, 255 in v1, never 0, 1 or 2) carrying code.
func awsServiceError(t *testing.T, r result, code string) {
	t.Helper()
	if r.code != 254 && r.code != 255 {
		t.Errorf("want a service error exit code (254/255) for %s, got %s", code, r)
	}
	if got := s3Error(r); got != code {
		t.Errorf("want error %s, got %q: %s", code, got, r)
	}
}

func md5hex(b []byte) string { s := md5.Sum(b); return hex.EncodeToString(s[:]) }

func jsonOut(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("parsing %q: %v", tail(s), err)
	}
}
