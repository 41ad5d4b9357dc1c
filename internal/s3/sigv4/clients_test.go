package sigv4

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/testutil"
)

// These tests run the real Python clients (botocore, the aws CLI) against
// a verifying server. They are skipped in -short mode (each start costs
// about a second of Python import); a missing tool fails them unless
// KELP_TEST_ALLOW_SKIP=1.

func needTool(t *testing.T, name string, args ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts external clients")
	}
	if err := exec.Command(name, args...).Run(); err != nil {
		testutil.SkipOrFail(t, "%s not usable: %v", name, err)
	}
}

// envWithout returns the environment minus the named variables (a CA
// bundle for real AWS would make rclone refuse the test server).
func envWithout(names ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, n := range names {
			keep = keep && k != n
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

func logServerErrors(t *testing.T, rs *recordingServer) {
	for _, s := range rs.take() {
		if s.err != nil {
			t.Logf("server: %s %s?%s: %v", s.method, s.path, s.query, s.err)
		}
	}
}

func checkAllVerified(t *testing.T, rs *recordingServer, min int) map[PayloadMode]int {
	t.Helper()
	all := rs.take()
	if len(all) < min {
		t.Fatalf("server saw %d requests, want at least %d", len(all), min)
	}
	modes := map[PayloadMode]int{}
	for _, s := range all {
		if s.err != nil {
			t.Errorf("%s %s?%s: %v", s.method, s.path, s.query, s.err)
			continue
		}
		modes[s.res.PayloadMode]++
	}
	return modes
}

func TestBotocore(t *testing.T) {
	needTool(t, "python3", "-c", "import botocore")
	for _, tls := range []bool{false, true} {
		rs := newRecordingServer(t, tls)
		args := append([]string{filepath.Join("testdata", "botocore_client.py"), rs.srv.URL, testAK, testSK}, trickyKeys...)
		cmd := exec.Command("python3", args...)
		cmd.Env = append(os.Environ(), "PYTHONWARNINGS=ignore", "AWS_CONFIG_FILE=/nonexistent", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent")
		out, err := cmd.CombinedOutput()
		if err != nil {
			logServerErrors(t, rs)
			t.Fatalf("tls=%v: %v\n%s", tls, err, out)
		}
		modes := checkAllVerified(t, rs, 4*len(trickyKeys)+1)
		t.Logf("tls=%v payload modes: %v", tls, modes)
		if modes[PayloadUnsigned] < 2*len(trickyKeys) {
			t.Errorf("tls=%v: presigned requests not seen as UNSIGNED-PAYLOAD: %v", tls, modes)
		}
	}
}

func TestAWSCLI(t *testing.T) {
	needTool(t, "aws", "--version")
	dir := t.TempDir()
	src := filepath.Join(dir, "src.txt")
	if err := os.WriteFile(src, bytes.Repeat([]byte("kelp "), 10000), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tls := range []bool{false, true} {
		rs := newRecordingServer(t, tls)
		run := func(args ...string) {
			t.Helper()
			args = append(args, "--endpoint-url", rs.srv.URL, "--no-verify-ssl")
			cmd := exec.Command("aws", args...)
			cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+testAK, "AWS_SECRET_ACCESS_KEY="+testSK,
				"AWS_DEFAULT_REGION=us-east-1", "AWS_CONFIG_FILE=/nonexistent", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent",
				"PYTHONWARNINGS=ignore")
			if out, err := cmd.CombinedOutput(); err != nil {
				logServerErrors(t, rs)
				t.Fatalf("tls=%v aws %s: %v\n%s", tls, strings.Join(args, " "), err, out)
			}
		}
		run("s3", "cp", src, "s3://bucket/dir/with space+plus~ключ.txt")
		want := 1
		if tls { // each run costs a second of Python start-up: the rest once
			run("s3api", "put-object", "--bucket", "bucket", "--key", "a%b&c=d", "--body", src)
			run("s3", "ls", "s3://bucket/dir/")
			want = 3
		}
		modes := checkAllVerified(t, rs, want)
		t.Logf("tls=%v payload modes: %v", tls, modes)
	}
}

func TestRclone(t *testing.T) {
	needTool(t, "rclone", "version")
	dir := t.TempDir()
	src := filepath.Join(dir, "src.bin")
	if err := os.WriteFile(src, bytes.Repeat([]byte("rclone "), 50000), 0o644); err != nil {
		t.Fatal(err)
	}
	rs := newRecordingServer(t, false)
	cmd := exec.Command("rclone", "copyto", src, "kelp:bucket/rclone dir/ключ+x~y.bin",
		"--s3-no-head", "--s3-no-check-bucket", "--retries", "1", "--low-level-retries", "1", "--config", "/dev/null")
	cmd.Env = append(envWithout("AWS_CA_BUNDLE"), "RCLONE_CONFIG_KELP_TYPE=s3", "RCLONE_CONFIG_KELP_PROVIDER=Other",
		"RCLONE_CONFIG_KELP_ACCESS_KEY_ID="+testAK, "RCLONE_CONFIG_KELP_SECRET_ACCESS_KEY="+testSK,
		"RCLONE_CONFIG_KELP_ENDPOINT="+rs.srv.URL)
	if out, err := cmd.CombinedOutput(); err != nil {
		logServerErrors(t, rs)
		t.Fatalf("rclone: %v\n%s", err, out)
	}
	all := rs.take()
	puts := 0
	for _, s := range all {
		if s.err != nil {
			t.Errorf("%s %s: %v", s.method, s.path, s.err)
		}
		if s.method == http.MethodPut && s.err == nil && len(s.body) == 350000 {
			puts++
		}
	}
	if puts == 0 {
		t.Fatalf("no verified upload among %d requests", len(all))
	}
}

func TestS3cmd(t *testing.T) {
	needTool(t, "s3cmd", "--version")
	dir := t.TempDir()
	src := filepath.Join(dir, "src.txt")
	if err := os.WriteFile(src, bytes.Repeat([]byte("s3cmd "), 3000), 0o644); err != nil {
		t.Fatal(err)
	}
	rs := newRecordingServer(t, false)
	host := strings.TrimPrefix(rs.srv.URL, "http://")
	cmd := exec.Command("s3cmd", "--config=/dev/null", "--access_key="+testAK, "--secret_key="+testSK,
		"--host="+host, "--host-bucket="+host, "--no-ssl", "put", src, "s3://bucket/s3cmd dir/a+b~ü.txt")
	if out, err := cmd.CombinedOutput(); err != nil {
		logServerErrors(t, rs)
		t.Fatalf("s3cmd: %v\n%s", err, out)
	}
	all := rs.take()
	puts := 0
	for _, s := range all {
		if s.err != nil {
			t.Errorf("%s %s: %v", s.method, s.path, s.err)
		}
		if s.method == http.MethodPut && s.err == nil && len(s.body) == 18000 {
			puts++
		}
	}
	if puts == 0 {
		t.Fatalf("no verified upload among %d requests", len(all))
	}
}
