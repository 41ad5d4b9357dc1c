package s3

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/kelpfs/kelp/internal/testutil"
)

func TestAuthentication(t *testing.T) {
	e := startEnv(t, func(c *Config) {
		c.Identities = append(c.Identities, Identity{Name: "reader", Credentials: []Credential{{"AKREADER", "reader-secret"}},
			Actions: []string{"Read:shared", "List:shared"}})
	})
	e.mkBucket("shared")
	e.mkBucket("private")
	b := aws.String("shared")
	if _, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("doc"), Body: strings.NewReader("hello")}); err != nil {
		t.Fatal(err)
	}
	_, err := e.client(testAK, "wrong").ListObjectsV2(e.ctx, &s3.ListObjectsV2Input{Bucket: b})
	e.wantCode(err, "SignatureDoesNotMatch")
	_, err = e.client("AKUNKNOWN", "x").ListObjectsV2(e.ctx, &s3.ListObjectsV2Input{Bucket: b})
	e.wantCode(err, "InvalidAccessKeyId")

	r := e.client("AKREADER", "reader-secret")
	if _, err := r.GetObject(e.ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String("doc")}); err != nil {
		t.Fatalf("reader get: %v", err)
	}
	if _, err := r.ListObjectsV2(e.ctx, &s3.ListObjectsV2Input{Bucket: b}); err != nil {
		t.Fatalf("reader list: %v", err)
	}
	_, err = r.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("x"), Body: strings.NewReader("x")})
	e.wantCode(err, "AccessDenied")
	_, err = r.ListObjectsV2(e.ctx, &s3.ListObjectsV2Input{Bucket: aws.String("private")})
	e.wantCode(err, "AccessDenied")
	_, err = r.CreateBucket(e.ctx, &s3.CreateBucketInput{Bucket: aws.String("newone")})
	e.wantCode(err, "AccessDenied")
	lb, err := r.ListBuckets(e.ctx, &s3.ListBucketsInput{})
	if err != nil || len(lb.Buckets) != 1 || aws.ToString(lb.Buckets[0].Name) != "shared" {
		t.Fatalf("reader's buckets: %v %v", lb, err)
	}
	// Copying needs Read on the source.
	_, err = e.client(testAK, testSK).CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: aws.String("private"), Key: aws.String("c"), CopySource: aws.String("shared/doc")})
	e.wantCode(err, "")

	// Anonymous: denied; a public-read bucket may be listed (its objects
	// stay private: TestPublicReadBucketKeepsObjectsPrivate).
	resp, err := http.Get(e.gw.URL() + "/shared/doc")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 || resp.Header.Get("x-amz-request-id") == "" {
		t.Fatalf("anonymous get: %d %v", resp.StatusCode, resp.Header)
	}
	if _, err := e.c.PutBucketAcl(e.ctx, &s3.PutBucketAclInput{Bucket: b, ACL: "public-read"}); err != nil {
		t.Fatal(err)
	}
	resp, err = http.Get(e.gw.URL() + "/shared/?list-type=2")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("anonymous list of public-read: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest("PUT", e.gw.URL()+"/shared/anon", strings.NewReader("x"))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Fatalf("anonymous put to public-read: %d", resp.StatusCode)
	}

	// Presigned URLs work until they expire.
	ps := s3.NewPresignClient(e.c)
	pr, err := ps.PresignGetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("private"), Key: aws.String("c")}, s3.WithPresignExpires(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	resp, err = http.Get(pr.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("presigned get: %d", resp.StatusCode)
	}
	resp, err = http.Get(strings.Replace(pr.URL, "/private/c", "/private/other", 1))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Fatalf("presigned URL for another key: %d", resp.StatusCode)
	}
}

// TestIdentityFileHotReload: a key added to the identity file is refused
// before the file changes and accepted after, a removed key is refused after,
// and a broken file is read (its error logged) and changes nothing. Each step
// waits for the gateway to have re-read the file, so the test fails when the
// file is never re-read.
func TestIdentityFileHotReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ids.json")
	write := func(s string) {
		if err := os.WriteFile(path+".tmp", []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"identities":[{"name":"a","credentials":[{"accessKey":"AKFILE1","secretKey":"s1"}],"actions":["Admin"]}]}`)
	logs := &recordingHandler{}
	e := startEnv(t, func(c *Config) {
		c.Identities = nil
		c.ConfigFile = path
		c.ReloadInterval = 20 * time.Millisecond
		c.Logger = slog.New(logs)
	})
	c1 := e.client("AKFILE1", "s1")
	c2 := e.client("AKFILE2", "s2")
	list := func(c *s3.Client) error {
		_, err := c.ListObjectsV2(e.ctx, &s3.ListObjectsV2Input{Bucket: aws.String("hot")})
		return err
	}
	if _, err := c1.CreateBucket(e.ctx, &s3.CreateBucketInput{Bucket: aws.String("hot")}); err != nil {
		t.Fatal(err)
	}
	// Not in the file yet: refused.
	e.wantCode(list(c2), "InvalidAccessKeyId")

	// b lists a's bucket by the operator's grant (List alone would be on
	// b's own buckets).
	write(`{"identities":[{"name":"b","credentials":[{"accessKey":"AKFILE2","secretKey":"s2"}],"actions":["List:hot"]}]}`)
	if !testutil.Eventually(5*time.Second, func() bool { return list(c2) == nil }) {
		t.Fatalf("new identity AKFILE2 not accepted: %v", list(c2))
	}
	e.wantCode(list(c1), "InvalidAccessKeyId")
	_, err := c2.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("hot"), Key: aws.String("x"), Body: strings.NewReader("x")})
	e.wantCode(err, "AccessDenied")

	// A broken file keeps the identities that work: wait until the gateway
	// has read it and said so.
	write(`{"identities": [`)
	testutil.WaitFor(t, 5*time.Second, func() bool { return logs.count("s3: identity file not reloaded") > 0 },
		"the broken identity file was never read")
	if err := list(c2); err != nil {
		t.Fatalf("after a broken file: %v", err)
	}
	e.wantCode(list(c1), "InvalidAccessKeyId")
	if _, err := LoadIdentityFile(path); err == nil {
		t.Fatal("broken identity file loaded")
	}
}

// recordingHandler is a slog.Handler that counts messages, so a test can
// wait for something the server only logs.
type recordingHandler struct {
	mu   sync.Mutex
	msgs map[string]int
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.msgs == nil {
		h.msgs = map[string]int{}
	}
	h.msgs[r.Message]++
	return nil
}

// count is how many messages starting with prefix were logged.
func (h *recordingHandler) count(prefix string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for msg, k := range h.msgs {
		if strings.HasPrefix(msg, prefix) {
			n += k
		}
	}
	return n
}

func TestNoIdentitiesRefused(t *testing.T) {
	_, err := New(Config{Namespace: nil})
	if err == nil {
		t.Fatal("gateway without namespace started")
	}
	e := startEnv(t, nil)
	if _, err := New(Config{Namespace: e.fs.Filer()}); err == nil || !strings.Contains(err.Error(), "no identities") {
		t.Fatalf("gateway without identities: %v", err)
	}
}

// TestMalformedInput sends broken documents and parameters: each is a 4xx
// S3 error with a request id, never a 500.
func TestMalformedInput(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("bad")
	cr, err := e.c.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bad"), Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	up := aws.ToString(cr.UploadId)
	garbage := []byte("<<<not xml")
	cases := []struct {
		method, path string
		body         []byte
		hdr          map[string]string
		code         string
	}{
		{"POST", "/bad?delete", garbage, nil, "MalformedXML"},
		{"POST", "/bad?delete", []byte("<Delete></Delete>"), nil, "MalformedXML"},
		{"POST", "/bad/k?uploadId=" + up, garbage, nil, "MalformedXML"},
		{"POST", "/bad/k?uploadId=" + up, []byte("<CompleteMultipartUpload></CompleteMultipartUpload>"), nil, "MalformedXML"},
		{"PUT", "/bad?cors", garbage, nil, "MalformedXML"},
		{"PUT", "/bad?cors", []byte("<CORSConfiguration><CORSRule><AllowedMethod>GET</AllowedMethod></CORSRule></CORSConfiguration>"), nil, "MalformedXML"},
		{"PUT", "/bad?tagging", garbage, nil, "MalformedXML"},
		{"PUT", "/bad/k?tagging", garbage, nil, "MalformedXML"},
		{"PUT", "/bad?versioning", garbage, nil, "MalformedXML"},
		{"PUT", "/bad/k?partNumber=0&uploadId=" + up, []byte("x"), nil, "InvalidArgument"},
		{"PUT", "/bad/k?partNumber=abc&uploadId=" + up, []byte("x"), nil, "InvalidArgument"},
		{"PUT", "/bad/k?partNumber=1&uploadId=nope", []byte("x"), nil, "NoSuchUpload"},
		{"GET", "/bad?max-keys=-1", nil, nil, "InvalidArgument"},
		{"GET", "/bad?list-type=2&continuation-token=@@@", nil, nil, "InvalidArgument"},
		{"GET", "/bad?encoding-type=zip", nil, nil, "InvalidArgument"},
		{"GET", "/bad/k?partNumber=0", nil, nil, "InvalidArgument"},
		{"PUT", "/bad/c", nil, map[string]string{"x-amz-copy-source": "nobucketkey"}, "InvalidArgument"},
		{"PUT", "/bad/c", nil, map[string]string{"x-amz-copy-source": "bad/k", "x-amz-metadata-directive": "MOVE"}, "InvalidArgument"},
		{"PUT", "/bad/t", []byte("x"), map[string]string{"x-amz-tagging": "%zz"}, "InvalidArgument"},
		{"PUT", "/bad/t", []byte("x"), map[string]string{"x-amz-checksum-crc32": "!!"}, "InvalidArgument"},
		{"PUT", "/bad/t", []byte("x"), map[string]string{"Content-MD5": ""}, "InvalidDigest"},
		{"PUT", "/bad/t", []byte("x"), map[string]string{"Content-MD5": "bm90IGEgZGlnZXN0"}, "InvalidDigest"},
		{"PUT", "/bad/t", []byte("x"), map[string]string{"x-amz-sdk-checksum-algorithm": "MD4"}, "InvalidRequest"},
		{"PUT", "/bad/k?uploadId=" + up + "&partNumber=1", nil, map[string]string{"x-amz-copy-source": "bad/none", "x-amz-copy-source-range": "bytes=9-1"}, "InvalidArgument"},
		{"DELETE", "/", nil, nil, "MethodNotAllowed"},
		{"PUT", "/Bad_Bucket", nil, nil, "InvalidBucketName"},
		{"GET", "/bad/k?versionId=123", nil, nil, "InvalidArgument"},
		{"GET", "/bad/k?versionId=0123456789abcdef0123456789abcdef", nil, nil, "NoSuchVersion"},
		{"DELETE", "/bad/k?versionId=../x", nil, nil, "InvalidArgument"},
		{"PUT", "/bad?versioning", []byte("<VersioningConfiguration><Status>On</Status></VersioningConfiguration>"), nil, "MalformedXML"},
		{"PUT", "/bad?versioning", []byte("<VersioningConfiguration><Status>Enabled</Status><MfaDelete>Enabled</MfaDelete></VersioningConfiguration>"), nil, "NotImplemented"},
	}
	for _, c := range cases {
		resp, body := e.raw(c.method, c.path, c.body, c.hdr)
		if resp.StatusCode >= 500 && c.code != "NotImplemented" || !strings.Contains(string(body), "<Code>"+c.code+"</Code>") ||
			!strings.Contains(string(body), "<RequestId>"+resp.Header.Get("x-amz-request-id")+"</RequestId>") {
			t.Errorf("%s %s: %d %s", c.method, c.path, resp.StatusCode, body)
		}
	}
}
