package s3

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
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

	// Anonymous: denied, unless the bucket is public-read.
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
	resp, err = http.Get(e.gw.URL() + "/shared/doc")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("anonymous get of public-read: %d", resp.StatusCode)
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
	e := startEnv(t, func(c *Config) {
		c.Identities = nil
		c.ConfigFile = path
		c.ReloadInterval = 20 * time.Millisecond
	})
	c1 := e.client("AKFILE1", "s1")
	if _, err := c1.CreateBucket(e.ctx, &s3.CreateBucketInput{Bucket: aws.String("hot")}); err != nil {
		t.Fatal(err)
	}
	write(`{"identities":[{"name":"b","credentials":[{"accessKey":"AKFILE2","secretKey":"s2"}],"actions":["List"]}]}`)
	c2 := e.client("AKFILE2", "s2")
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := c2.ListObjectsV2(e.ctx, &s3.ListObjectsV2Input{Bucket: aws.String("hot")})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("new identity not loaded: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, err := c1.ListObjectsV2(e.ctx, &s3.ListObjectsV2Input{Bucket: aws.String("hot")})
	e.wantCode(err, "InvalidAccessKeyId")
	_, err = c2.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("hot"), Key: aws.String("x"), Body: strings.NewReader("x")})
	e.wantCode(err, "AccessDenied")
	// A broken file keeps the identities that work.
	write(`{"identities": [`)
	time.Sleep(100 * time.Millisecond)
	if _, err := c2.ListObjectsV2(e.ctx, &s3.ListObjectsV2Input{Bucket: aws.String("hot")}); err != nil {
		t.Fatalf("after a broken file: %v", err)
	}
	if _, err := LoadIdentityFile(path); err == nil {
		t.Fatal("broken identity file loaded")
	}
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
