package s3

import (
	"bytes"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// A quota on a bucket's directory (fs.quota, filer ?op=quota) limits the
// bucket: a PUT past it is 403 QuotaExceeded and what is stored stays.
func TestBucketQuota(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("qbucket")
	put := func(key string, n int) error {
		_, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("qbucket"), Key: aws.String(key), Body: bytes.NewReader(make([]byte, n))})
		return err
	}
	if err := put("a", 600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Filer().SetQuota(e.ctx, "/buckets/qbucket", 1000, 0); err != nil {
		t.Fatal(err)
	}
	e.wantCode(put("b", 600), "QuotaExceeded")
	if err := put("c", 400); err != nil {
		t.Fatal(err)
	}
	out, err := e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("qbucket"), Key: aws.String("a")})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if len(b) != 600 {
		t.Fatalf("stored object: %d bytes", len(b))
	}
	// Deleting frees room.
	if _, err := e.c.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: aws.String("qbucket"), Key: aws.String("a")}); err != nil {
		t.Fatal(err)
	}
	if err := put("b", 600); err != nil {
		t.Fatal(err)
	}
}
