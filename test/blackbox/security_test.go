package blackbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/fsview"
	"github.com/kelpfs/kelp/internal/pb"
	"github.com/kelpfs/kelp/internal/pb/volumepb"
)

// secReq sends one request with an optional bearer token and returns the
// status and body; every error text is collected for the secret scan.
type secClient struct {
	t    *testing.T
	errs []string
}

func (c *secClient) do(method, url, token string, body []byte) (int, string) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 400 {
		c.errs = append(c.errs, string(b))
	}
	return resp.StatusCode, string(b)
}

func (c *secClient) want(what string, got, want int, body string) {
	c.t.Helper()
	if got != want {
		c.t.Errorf("%s: status %d, want %d (%s)", what, got, want, strings.TrimSpace(body))
	}
}

// TestSecurityAuth runs `kelp server` with signed file ids, access tokens
// and an audit log, and checks from outside: the volume server refuses
// writes and deletes without a token, with an expired one, one for another
// file id and a forged one (401, nothing changed); the master refuses an
// unauthenticated assign; the filer refuses unauthenticated (401) and
// read-only (403) writes; S3 (SigV4, AWS SDK) and an fsview client (the
// WebDAV/FUSE path) work; the audit log has the writes; no key or token
// appears in any log line or error.
func TestSecurityAuth(t *testing.T) {
	dir := t.TempDir()
	signKey, readKey := "signkey-"+auth.NewToken(), "readkey-"+auth.NewToken()
	admin, viewer := "admintok-"+auth.NewToken(), "viewertok-"+auth.NewToken()
	s3Secret := "s3secret-" + auth.NewToken()
	keyFile, tokFile, auditFile := filepath.Join(dir, "jwt.key"), filepath.Join(dir, "tokens"), filepath.Join(dir, "audit.log")
	os.WriteFile(keyFile, []byte(signKey+"\n"), 0o600)
	readKeyFile := filepath.Join(dir, "read.key")
	os.WriteFile(readKeyFile, []byte(readKey+"\n"), 0o600)
	os.WriteFile(tokFile, []byte("# test\nalice rw "+admin+"\nbob ro "+viewer+"\n"), 0o600)
	var ports serverPorts
	p := startServer(t, filepath.Join(dir, "data"), &ports, "--jwt.signing.key=@"+keyFile, "--jwt.signing.read.key=@"+readKeyFile, "--access.tokens="+tokFile,
		"--audit.log="+auditFile, "--s3.access-key=secak0000000001", "--s3.secret-key="+s3Secret)
	c := &secClient{t: t}
	master, volume, filerURL := "http://"+hostport(ports.master), "http://"+hostport(ports.volume), "http://"+hostport(ports.filer)

	// The master: assign needs a read-write token.
	st, body := c.do("GET", master+"/dir/assign", "", nil)
	c.want("assign without a token", st, 401, body)
	st, body = c.do("GET", master+"/dir/assign", viewer, nil)
	c.want("assign with a read-only token", st, 403, body)
	assignWith := func() (fid.FileID, string) {
		t.Helper()
		st, body := c.do("GET", master+"/dir/assign", admin, nil)
		for deadline := time.Now().Add(30 * time.Second); st == 503 && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond) // until the volume server's heartbeat is in
			st, body = c.do("GET", master+"/dir/assign", admin, nil)
		}
		if st != 200 {
			t.Fatalf("assign: %d %s", st, body)
		}
		var a struct{ Fid, Url, Auth string }
		if err := json.Unmarshal([]byte(body), &a); err != nil || a.Auth == "" {
			t.Fatalf("assign answer %s: no auth (%v)", body, err)
		}
		id, err := fid.Parse(a.Fid)
		if err != nil {
			t.Fatal(err)
		}
		return id, a.Auth
	}
	idA, tokA := assignWith()
	idB, tokB := assignWith()
	urlA, urlB := volume+"/"+idA.String(), volume+"/"+idB.String()

	// The volume server: a write with no, expired, misbound or forged token
	// is refused and stores nothing.
	expired := func() string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"fid": idA.String(), "exp": time.Now().Add(-time.Minute).Unix()}).SignedString([]byte(signKey))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}()
	forged := auth.NewSigner("another-key-entirely", time.Minute).Sign(idA, 1)
	for _, tc := range []struct{ name, tok string }{{"no token", ""}, {"expired", expired}, {"another fid's", tokB}, {"forged", forged}, {"an access token", admin}} {
		st, body := c.do("PUT", urlA, tc.tok, []byte("intruder"))
		c.want("volume write with "+tc.name, st, 401, body)
	}
	readA := auth.NewSigner(readKey, time.Minute).Sign(idA, 1)
	st, body = c.do("GET", urlA, readA, nil)
	c.want("read of a refused write", st, 404, body)
	st, body = c.do("PUT", urlA, tokA, []byte("hello"))
	c.want("volume write with its token", st, 201, body)
	st, body = c.do("PUT", urlB, tokB, []byte("other"))
	c.want("volume write B with its token", st, 201, body)
	for _, tc := range []struct{ name, tok string }{{"no token", ""}, {"expired", expired}, {"another fid's", tokB}, {"forged", forged}} {
		st, body := c.do("DELETE", urlA, tc.tok, nil)
		c.want("volume delete with "+tc.name, st, 401, body)
	}
	st, body = c.do("GET", urlA, "", nil)
	c.want("volume read without a read token", st, 401, body)
	st, body = c.do("GET", urlA, tokA, nil)
	c.want("volume read with a write token", st, 401, body)
	st, body = c.do("GET", urlA, readA, nil)
	if st != 200 || body != "hello" {
		t.Errorf("after refused deletes: %d %q, want 200 hello", st, body)
	}
	st, body = c.do("PUT", volume+"/1,0123456789abcdef", "", []byte("x"))
	c.want("volume write of a made-up fid", st, 401, body)
	st, body = c.do("DELETE", volume+"/1,0123456789abcdef", "", nil)
	c.want("volume delete of a made-up fid", st, 401, body)
	st, body = c.do("GET", volume+"/sync/index?volume="+fmt.Sprint(idA.Volume), "", nil)
	c.want("volume /sync/index without the server token", st, 401, body)

	// The filer: reads need a token, writes a read-write one.
	st, body = c.do("PUT", filerURL+"/intruder.txt", "", []byte("x"))
	c.want("filer write without a token", st, 401, body)
	st, body = c.do("PUT", filerURL+"/intruder.txt", viewer, []byte("x"))
	c.want("filer write with a read-only token", st, 403, body)
	st, body = c.do("GET", filerURL+"/intruder.txt", admin, nil)
	c.want("read of a refused filer write", st, 404, body)
	st, body = c.do("PUT", filerURL+"/docs/ok.txt", admin, []byte("filer data"))
	if st/100 != 2 {
		t.Errorf("filer write with a read-write token: %d %s", st, body)
	}
	st, body = c.do("GET", filerURL+"/docs/ok.txt", viewer, nil)
	if st != 200 || body != "filer data" {
		t.Errorf("filer read with a read-only token: %d %q", st, body)
	}
	st, body = c.do("GET", filerURL+"/docs/ok.txt", "", nil)
	c.want("filer read without a token", st, 401, body)
	st, body = c.do("DELETE", filerURL+"/docs/ok.txt", viewer, nil)
	c.want("filer delete with a read-only token", st, 403, body)

	// S3 with SigV4 through the AWS SDK: chunks go through assign's tokens.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s3c := s3.New(s3.Options{Region: "us-east-1", UsePathStyle: true, BaseEndpoint: aws.String("http://" + hostport(ports.s3)),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "secak0000000001", SecretAccessKey: s3Secret}, nil
		})})
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("secure")}); err != nil {
		t.Fatalf("s3 create bucket: %v", err)
	}
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("secure"), Key: aws.String("k"), Body: strings.NewReader("s3 data")}); err != nil {
		t.Fatalf("s3 put: %v", err)
	}
	out, err := s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("secure"), Key: aws.String("k")})
	if err != nil {
		t.Fatalf("s3 get: %v", err)
	}
	got, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if string(got) != "s3 data" {
		t.Errorf("s3 get: %q", got)
	}
	if _, err := s3c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("secure"), Key: aws.String("k")}); err != nil {
		t.Errorf("s3 delete: %v", err)
	}

	// The fsview path (WebDAV, FUSE): refused without a token, works with one.
	grpcFiler, err := pb.GRPCAddress(hostport(ports.filer))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fsview.New(ctx, fsview.Config{Filer: grpcFiler, ConnectTimeout: 5 * time.Second}); err == nil {
		t.Errorf("fsview without a token connected")
	} else {
		c.errs = append(c.errs, err.Error())
	}
	fsys, err := fsview.New(ctx, fsview.Config{Filer: grpcFiler, ConnectTimeout: 10 * time.Second, AccessToken: admin})
	if err != nil {
		t.Fatalf("fsview with a token: %v", err)
	}
	defer fsys.Close()
	h, err := fsys.Create(ctx, "/docs/view.txt", os.O_WRONLY, 0o644, 0, 0)
	if err != nil {
		t.Fatalf("fsview create: %v", err)
	}
	if _, err := h.WriteAt(ctx, []byte("via fsview"), 0); err != nil {
		t.Fatalf("fsview write: %v", err)
	}
	if err := h.Fsync(ctx); err != nil {
		t.Fatalf("fsview fsync: %v", err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatalf("fsview release: %v", err)
	}
	st, body = c.do("GET", filerURL+"/docs/view.txt", admin, nil)
	if st != 200 || body != "via fsview" {
		t.Errorf("read of the fsview write: %d %q", st, body)
	}
	// A read-only identity over gRPC: lists and reads, cannot create.
	ro, err := fsview.New(ctx, fsview.Config{Filer: grpcFiler, ConnectTimeout: 10 * time.Second, AccessToken: viewer})
	if err != nil {
		t.Fatalf("fsview with a read-only token: %v", err)
	}
	defer ro.Close()
	rh, err := ro.Open(ctx, "/docs/view.txt", os.O_RDONLY)
	if err != nil {
		t.Fatalf("read-only fsview open: %v", err)
	}
	buf := make([]byte, 64)
	n, err := rh.ReadAt(ctx, buf, 0)
	if string(buf[:n]) != "via fsview" {
		t.Errorf("read-only fsview read (chunks need a read token from the master): %q %v", buf[:n], err)
	}
	rh.Release(ctx)
	if _, err := ro.Create(ctx, "/docs/ro.txt", os.O_WRONLY, 0o644, 0, 0); err == nil {
		t.Error("a read-only identity created a file over gRPC")
	} else {
		c.errs = append(c.errs, err.Error())
	}
	st, body = c.do("GET", filerURL+"/docs/ro.txt", admin, nil)
	c.want("read of the refused gRPC create", st, 404, body)

	// The admin shell: the lock (a master mutation) needs the token.
	adminFile := filepath.Join(dir, "admin.token")
	os.WriteFile(adminFile, []byte(admin+"\n"), 0o600)
	shellOut, err := exec.Command(kelpBin, "shell", "--master="+hostport(ports.master), "-c", "lock; unlock").CombinedOutput()
	if err == nil {
		t.Errorf("kelp shell lock without a token succeeded: %s", shellOut)
	}
	c.errs = append(c.errs, string(shellOut))
	shellOut, err = exec.Command(kelpBin, "shell", "--master="+hostport(ports.master), "--access.token=@"+adminFile, "-c", "lock; unlock").CombinedOutput()
	if err != nil {
		t.Errorf("kelp shell lock with the admin token: %v: %s", err, shellOut)
	}
	c.errs = append(c.errs, string(shellOut))

	// The volume server's admin gRPC API: refused without credentials;
	// the shell's volume commands reach it with the admin token.
	cc, err := grpc.NewClient(hostport(ports.volume+pb.GRPCPortOffset), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	_, err = volumepb.NewVolumeServerClient(cc).MarkVolume(ctx, &volumepb.MarkVolumeRequest{VolumeId: idA.Volume, ReadOnly: true}, grpc.WaitForReady(true))
	if grpcstatus.Code(err) != codes.Unauthenticated {
		t.Errorf("volume admin gRPC without credentials: %v, want Unauthenticated", err)
	} else {
		c.errs = append(c.errs, err.Error())
	}
	mark := fmt.Sprintf("lock; volume.mark -volumeId=%d -readonly; volume.mark -volumeId=%d -writable; unlock", idA.Volume, idA.Volume)
	shellOut, err = exec.Command(kelpBin, "shell", "--master="+hostport(ports.master), "--access.token=@"+adminFile, "-c", mark).CombinedOutput()
	if err != nil {
		t.Errorf("kelp shell volume.mark with the admin token: %v: %s", err, shellOut)
	}
	c.errs = append(c.errs, string(shellOut))

	// The master's status page and the audit log.
	st, body = c.do("GET", master+"/cluster/status", "", nil)
	c.want("cluster status", st, 200, body)
	status := body
	auditLog, _ := os.ReadFile(auditFile)
	for _, want := range []string{`"service":"filer","who":"alice"`, `"service":"filer","who":"bob","role":"ro"`, `"status":403`,
		`"service":"master","who":"alice"`, `"service":"s3"`, `"service":"volume","who":""`, `"status":401`,
		`"service":"filer","who":"bob","role":"ro","remote":"127.0.0.1","action":"grpc"`} {
		if !strings.Contains(string(auditLog), want) {
			t.Errorf("audit log lacks %s:\n%s", want, auditLog)
		}
	}
	p.kill()
	everything := p.log.String() + "\n" + string(auditLog) + "\n" + status + "\n" + strings.Join(c.errs, "\n")
	for name, secret := range map[string]string{"signing key": signKey, "read key": readKey, "admin token": admin, "read-only token": viewer, "s3 secret": s3Secret, "file token": tokA} {
		if strings.Contains(everything, secret) {
			t.Errorf("the %s appears in a log line, error or status page", name)
		}
	}
	if t.Failed() {
		t.Logf("server log (tail):\n%s", tail(p.log.String()))
	}
}

// TestSecurityAccessTokensOnly: access tokens without signed file ids; the
// filer of `kelp server` still assigns (with a token of its own), and the
// master and the filer still refuse the unauthenticated.
func TestSecurityAccessTokensOnly(t *testing.T) {
	dir := t.TempDir()
	admin := "admintok-" + auth.NewToken()
	tokFile := filepath.Join(dir, "tokens")
	os.WriteFile(tokFile, []byte("admin rw "+admin+"\n"), 0o600)
	var ports serverPorts
	p := startServer(t, filepath.Join(dir, "data"), &ports, "--access.tokens="+tokFile, "--s3.access-key=secak0000000002", "--s3.secret-key=secsk-"+auth.NewToken())
	c := &secClient{t: t}
	master, filerURL := "http://"+hostport(ports.master), "http://"+hostport(ports.filer)
	st, body := c.do("GET", master+"/dir/assign", "", nil)
	c.want("assign without a token", st, 401, body)
	st, body = c.do("PUT", filerURL+"/intruder.txt", "", []byte("x"))
	c.want("filer write without a token", st, 401, body)
	st, body = c.do("PUT", filerURL+"/a.txt", admin, []byte("data"))
	for deadline := time.Now().Add(30 * time.Second); st == 503 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond) // until the volume server's heartbeat is in
		st, body = c.do("PUT", filerURL+"/a.txt", admin, []byte("data"))
	}
	if st/100 != 2 {
		t.Errorf("filer write with the admin token: %d %s\n%s", st, body, tail(p.log.String()))
	}
	st, body = c.do("GET", filerURL+"/a.txt", admin, nil)
	if st != 200 || body != "data" {
		t.Errorf("filer read: %d %q", st, body)
	}
	if strings.Contains(p.log.String(), admin) {
		t.Error("the admin token appears in the log")
	}
}
