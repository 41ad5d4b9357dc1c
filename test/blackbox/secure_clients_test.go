package blackbox

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/pb"
	"github.com/kelpfs/kelp/internal/testutil"
)

// secureServer is a running `kelp server --secure` and the files it
// generated under DIR/security.
type secureServer struct {
	proc        *process
	ports       serverPorts
	webdav      int
	sec         string // DIR/security
	ca          string // DIR/security/ca.crt
	config      string // DIR/security/security.toml: the tools' TLS settings
	adminToken  string // DIR/security/admin.token
	https       *http.Client
	s3Endpoint  string
	dav, filerU string
}

// startSecureServer starts `kelp server --secure` with S3 keys and WebDAV
// and waits until every port answers over TLS with the generated CA.
func startSecureServer(t *testing.T, extra ...string) *secureServer {
	t.Helper()
	dir := t.TempDir()
	for attempt := 0; ; attempt++ {
		p := testutil.FreePorts(t, 5, pb.GRPCPortOffset, pb.RaftPortOffset)
		s := &secureServer{ports: serverPorts{p[0], p[1], p[2], p[3]}, webdav: p[4], sec: filepath.Join(dir, "security")}
		s.ca, s.config, s.adminToken = filepath.Join(s.sec, "ca.crt"), filepath.Join(s.sec, "security.toml"), filepath.Join(s.sec, "admin.token")
		args := append([]string{"server", "--dir=" + dir, "--ip=127.0.0.1", "--secure"}, s.ports.args()...)
		args = append(args, "--webdav.port="+strconv.Itoa(s.webdav), "--s3.access-key="+s3AccessKey, "--s3.secret-key="+s3SecretKey)
		s.proc = startKelp(t, append(args, extra...)...)
		err := s.waitTLS()
		if err == nil {
			s.s3Endpoint = "https://" + hostport(s.ports.s3)
			s.dav, s.filerU = "https://"+hostport(s.webdav), "https://"+hostport(s.ports.filer)
			return s
		}
		s.proc.kill()
		if attempt < 5 && testutil.AddrInUse(errors.New(s.proc.log.String())) {
			continue
		}
		t.Fatalf("kelp server --secure: %v; log:\n%s", err, s.proc.log.String())
	}
}

// waitTLS waits for the generated CA, then for every port to answer
// /healthz over TLS verified with it.
func (s *secureServer) waitTLS() error {
	deadline := time.Now().Add(90 * time.Second)
	for {
		pem, err := os.ReadFile(s.ca)
		if err == nil && len(pem) > 0 {
			pool := x509.NewCertPool()
			if pool.AppendCertsFromPEM(pem) {
				s.https = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
				break
			}
		}
		if exited(s.proc) || time.Now().After(deadline) {
			return fmt.Errorf("no CA at %s", s.ca)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, port := range []int{s.ports.master, s.ports.volume, s.ports.filer, s.ports.s3, s.webdav} {
		u := "https://" + hostport(port) + "/healthz"
		for {
			resp, err := s.https.Get(u)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode < 500 {
					break
				}
			}
			if exited(s.proc) {
				return fmt.Errorf("exited before %s answered", u)
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s never answered over TLS: %v", u, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// TestSecureServerRealClients runs `kelp server --secure` and drives it with
// the real clients a user would point at it, each trusting the generated CA:
// rclone and s3cmd and the aws CLI over S3, `kelp mount` (FUSE) with the
// admin token and the generated certificate, and curl over WebDAV. Each
// writes, lists and reads back; the bytes are compared. Plain HTTP is
// refused on every port.
func TestSecureServerRealClients(t *testing.T) {
	s := startSecureServer(t)
	work := t.TempDir()
	payload := filepath.Join(work, "payload.bin")
	writeRandomFile(t, payload, 3<<20+17, 41) // more than one chunk

	t.Run("plain-http-refused", func(t *testing.T) {
		plain := &http.Client{Timeout: 5 * time.Second}
		for name, port := range map[string]int{"master": s.ports.master, "volume": s.ports.volume, "filer": s.ports.filer, "s3": s.ports.s3, "webdav": s.webdav} {
			resp, err := plain.Get("http://" + hostport(port) + "/healthz")
			if err != nil {
				continue
			}
			resp.Body.Close()
			if resp.StatusCode < 400 {
				t.Errorf("plain HTTP to the %s port answered %d; --secure serves TLS only", name, resp.StatusCode)
			}
		}
	})
	t.Run("rclone", func(t *testing.T) { secureRclone(t, s, payload) })
	t.Run("s3cmd", func(t *testing.T) { secureS3cmd(t, s, payload) })
	t.Run("aws", func(t *testing.T) { secureAWS(t, s, payload) })
	t.Run("webdav-curl", func(t *testing.T) { secureWebDAV(t, s, payload) })
	t.Run("fuse-mount", func(t *testing.T) { secureMount(t, s, payload) })
	t.Run("kelp-benchmark", func(t *testing.T) { secureBenchmark(t, s) })
	if t.Failed() {
		t.Logf("server log (tail):\n%s", tail(s.proc.log.String()))
	}
}

// secureBenchmark runs `kelp benchmark` with the generated security.toml:
// its own HTTP client speaks TLS to the master and the volume server (the
// fast assign, upload and read paths, with the client certificate as the
// master's identity and a token per write) and checks every answer.
func secureBenchmark(t *testing.T, s *secureServer) {
	out, err := exec.Command(kelpBin, "benchmark", "--security.config="+s.config, "--master="+hostport(s.ports.master),
		"--n=300", "--size=1024", "--concurrency=4").CombinedOutput()
	if err != nil {
		t.Fatalf("kelp benchmark against --secure: %v\n%s", err, out)
	}
	for _, phase := range []string{"write:  300 requests, 0 failed", "read:   300 requests, 0 failed"} {
		if !strings.Contains(string(out), phase) {
			t.Errorf("kelp benchmark output lacks %q:\n%s", phase, out)
		}
	}
}

func secureRclone(t *testing.T, s *secureServer, payload string) {
	bin := needTool(t, "rclone")
	home := t.TempDir()
	conf := filepath.Join(home, "rclone.conf")
	writeFile(t, conf, []byte(fmt.Sprintf("[k]\ntype = s3\nprovider = Other\naccess_key_id = %s\nsecret_access_key = %s\n"+
		"endpoint = %s\nregion = %s\nforce_path_style = true\n", s3AccessKey, s3SecretKey, s.s3Endpoint, s3Region)))
	rc := &tool{t: t, bin: bin, env: append(baseEnv(home), "RCLONE_CONFIG="+conf), dir: home}
	src := filepath.Join(home, "src")
	writeFile(t, filepath.Join(src, "small.txt"), []byte("rclone over TLS\n"))
	if err := os.Link(payload, filepath.Join(src, "payload.bin")); err != nil {
		t.Fatal(err)
	}
	ca := []string{"--ca-cert", s.ca}
	rc.run(append(ca, "mkdir", "k:sec-rclone")...)
	rc.run(append(ca, "copy", src, "k:sec-rclone/d")...)
	ls := rc.run(append(ca, "lsf", "k:sec-rclone/d")...)
	for _, want := range []string{"small.txt", "payload.bin"} {
		if !strings.Contains(ls, want) {
			t.Errorf("rclone lsf lacks %s:\n%s", want, ls)
		}
	}
	down := filepath.Join(home, "down")
	rc.run(append(ca, "copy", "k:sec-rclone/d", down)...)
	sameTree(t, src, down)
	// Without the CA the server's certificate is not trusted.
	if r := rc.try("lsf", "--low-level-retries", "1", "--retries", "1", "k:sec-rclone/d"); r.code == 0 {
		t.Errorf("rclone without --ca-cert trusted the server: %s", r)
	}
	// A plain-HTTP endpoint is refused.
	if r := rc.try("lsf", "--low-level-retries", "1", "--retries", "1", "--s3-endpoint", "http://"+hostport(s.ports.s3), "k:sec-rclone/d"); r.code == 0 {
		t.Errorf("rclone over plain HTTP listed the bucket: %s", r)
	}
}

func secureS3cmd(t *testing.T, s *secureServer, payload string) {
	bin := needTool(t, "s3cmd")
	home := t.TempDir()
	conf := filepath.Join(home, ".s3cfg")
	hp := hostport(s.ports.s3)
	writeFile(t, conf, []byte(fmt.Sprintf("[default]\naccess_key = %s\nsecret_key = %s\nhost_base = %s\nhost_bucket = %s\n"+
		"use_https = True\nsignature_v2 = False\nbucket_location = %s\ncheck_ssl_certificate = True\ncheck_ssl_hostname = True\n",
		s3AccessKey, s3SecretKey, hp, hp, s3Region)))
	c := &tool{t: t, bin: bin, env: baseEnv(home), dir: home}
	sc := func(args ...string) string {
		return c.run(append([]string{"-c", conf, "--ca-certs=" + s.ca}, args...)...)
	}
	sc("mb", "s3://sec-s3cmd")
	sc("put", payload, "s3://sec-s3cmd/dir/payload.bin")
	if ls := sc("ls", "--recursive", "s3://sec-s3cmd"); !strings.Contains(ls, "s3://sec-s3cmd/dir/payload.bin") {
		t.Errorf("s3cmd ls lacks the object:\n%s", ls)
	}
	got := filepath.Join(home, "got.bin")
	sc("get", "s3://sec-s3cmd/dir/payload.bin", got)
	sameFile(t, payload, got)
	if r := c.try("-c", conf, "ls", "s3://sec-s3cmd"); r.code == 0 {
		t.Errorf("s3cmd without --ca-certs trusted the server: %s", r)
	}
}

func secureAWS(t *testing.T, s *secureServer, payload string) {
	a := awsCLI(t, &s3Server{proc: s.proc, endpoint: s.s3Endpoint, hostport: hostport(s.ports.s3)}, s3SecretKey)
	aws := func(args ...string) string {
		return a.run(append([]string{"--endpoint-url", s.s3Endpoint, "--ca-bundle", s.ca}, args...)...)
	}
	aws("s3", "mb", "s3://sec-aws")
	aws("s3", "cp", payload, "s3://sec-aws/p/payload.bin")
	if ls := aws("s3", "ls", "s3://sec-aws/p/"); !strings.Contains(ls, "payload.bin") {
		t.Errorf("aws s3 ls lacks the object:\n%s", ls)
	}
	got := filepath.Join(t.TempDir(), "got.bin")
	aws("s3", "cp", "s3://sec-aws/p/payload.bin", got)
	sameFile(t, payload, got)
	a.env = append(a.env, "AWS_MAX_ATTEMPTS=1") // a refusal is final: no retries
	if r := a.try("--endpoint-url", "http://"+hostport(s.ports.s3), "--cli-read-timeout", "5", "--cli-connect-timeout", "5", "s3", "ls", "s3://sec-aws/"); r.code == 0 {
		t.Errorf("aws over plain HTTP listed the bucket: %s", r)
	}
}

func secureWebDAV(t *testing.T, s *secureServer, payload string) {
	bin := needTool(t, "curl")
	c := &tool{t: t, bin: bin, env: baseEnv(t.TempDir())}
	base := []string{"-sS", "--fail", "--cacert", s.ca}
	c.run(append(base, "-X", "MKCOL", s.dav+"/davdir/")...)
	c.run(append(base, "-T", payload, s.dav+"/davdir/payload.bin")...)
	ls := c.run(append(base, "-X", "PROPFIND", "-H", "Depth: 1", s.dav+"/davdir/")...)
	if !strings.Contains(ls, "/davdir/payload.bin") {
		t.Errorf("PROPFIND lacks the file:\n%s", tail(ls))
	}
	got := filepath.Join(t.TempDir(), "got.bin")
	c.run(append(base, "-o", got, s.dav+"/davdir/payload.bin")...)
	sameFile(t, payload, got)
	if r := c.try("-sS", "--fail", "--max-time", "5", "http://"+hostport(s.webdav)+"/davdir/payload.bin"); r.code == 0 {
		t.Errorf("WebDAV over plain HTTP answered: %s", r)
	}
	if r := c.try("-sS", "--fail", "--max-time", "5", s.dav+"/davdir/payload.bin"); r.code == 0 {
		t.Errorf("curl without the CA trusted the WebDAV server: %s", r)
	}
}

// secureMount mounts the filer with the generated certificate (the filer's
// gRPC wants a client certificate) and the admin token, writes through the
// mount, lists and reads back, and reads the WebDAV test's file.
func secureMount(t *testing.T, s *secureServer, payload string) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		testutil.SkipOrFail(t, "no /dev/fuse: %v", err)
	}
	needTool(t, "fusermount3")
	mnt := filepath.Join(t.TempDir(), "m")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	m := startMount(t, mnt, "--filer="+hostport(s.ports.filer), "--security.config="+s.config, "--access.token=@"+s.adminToken)
	want, _ := os.ReadFile(payload)
	dst := filepath.Join(mnt, "fusedir", "payload.bin")
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatalf("mkdir through the mount: %v\n%s", err, m.log.String())
	}
	if err := os.WriteFile(dst, want, 0o644); err != nil {
		t.Fatalf("write through the mount: %v\n%s", err, m.log.String())
	}
	ents, err := os.ReadDir(filepath.Dir(dst))
	if err != nil || len(ents) != 1 || ents[0].Name() != "payload.bin" {
		t.Errorf("list through the mount: %v %v", ents, err)
	}
	if got, err := os.ReadFile(dst); err != nil || !bytes.Equal(got, want) {
		t.Errorf("read back through the mount: %d bytes, %v; want %d bytes", len(got), err, len(want))
	}
	// The WebDAV client's file, seen through the mount, and the mount's
	// file through the filer's HTTP API with the token.
	if got, err := os.ReadFile(filepath.Join(mnt, "davdir", "payload.bin")); err != nil || !bytes.Equal(got, want) {
		t.Errorf("the WebDAV file through the mount: %d bytes, %v", len(got), err)
	}
	tok, _ := os.ReadFile(s.adminToken)
	req, _ := http.NewRequest("GET", s.filerU+"/fusedir/payload.bin", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	if resp, err := s.https.Do(req); err != nil {
		t.Errorf("filer read of the mount's file: %v", err)
	} else {
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Equal(b.Bytes(), want) {
			t.Errorf("filer read of the mount's file: %d, %d bytes", resp.StatusCode, b.Len())
		}
	}
	m.unmount(t, mnt)
}

// startMount starts `kelp mount --dir=mnt args...` and waits until mnt is
// a mount point.
func startMount(t *testing.T, mnt string, args ...string) *process {
	t.Helper()
	m := startKelp(t, append([]string{"mount", "--dir=" + mnt}, args...)...)
	t.Cleanup(func() { exec.Command("fusermount3", "-u", "-z", mnt).Run() })
	for deadline := time.Now().Add(60 * time.Second); !isMountPoint(mnt); time.Sleep(20 * time.Millisecond) {
		if exited(m) || time.Now().After(deadline) {
			t.Fatalf("kelp mount did not mount %s:\n%s", mnt, m.log.String())
		}
	}
	return m
}

// isMountPoint reports whether dir is listed in this process's mounts.
func isMountPoint(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// unmount asks the mount to end (SIGTERM unmounts) and waits for it.
func (p *process) unmount(t *testing.T, mnt string) {
	p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Errorf("kelp mount did not end on SIGTERM")
		exec.Command("fusermount3", "-u", "-z", mnt).Run()
	}
}
