package s3

import (
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Operations Kelp does not serve are refused, never taken for another:
// an unknown sub-resource of a PUT once stored the body as the object (a
// RenameObject wrote an empty key), an unknown GET sub-resource answered a
// listing.
func TestUnservedOperationsAreRefused(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("unserved")
	if _, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("unserved"), Key: aws.String("k"),
		Body: strings.NewReader("keep")}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method, path string
		hdr          map[string]string
	}{
		{"PUT", "/unserved/k2?renameObject", map[string]string{"x-amz-rename-source": "unserved/k"}},
		{"GET", "/unserved?session", nil},
		{"GET", "/unserved?metadataTable", nil},
		{"GET", "/unserved?metadataConfiguration", nil},
		{"GET", "/unserved?abac", nil},
		{"GET", "/?x-id=ListDirectoryBuckets", nil},
	} {
		resp, out := e.raw(c.method, c.path, nil, c.hdr)
		if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(string(out), "NotImplemented") {
			t.Errorf("%s %s answered %d %s, want 501 NotImplemented", c.method, c.path, resp.StatusCode, out)
		}
	}
	if _, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: aws.String("unserved"), Key: aws.String("k2")}); err == nil {
		t.Error("a refused RenameObject stored an object at its key")
	}
}

// Kelp has one storage class: asking for another is refused, never
// ignored; STANDARD is accepted.
func TestStorageClassIsNotIgnored(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("classes")
	put := func(sc types.StorageClass) error {
		_, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("classes"), Key: aws.String("k"),
			Body: strings.NewReader("x"), StorageClass: sc})
		return err
	}
	if err := put(types.StorageClassStandard); err != nil {
		t.Fatalf("STANDARD: %v", err)
	}
	e.wantCode(put(types.StorageClassGlacier), "InvalidStorageClass")
	_, err := e.c.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("classes"), Key: aws.String("m"),
		StorageClass: types.StorageClassStandardIa})
	e.wantCode(err, "InvalidStorageClass")
	_, err = e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: aws.String("classes"), Key: aws.String("c"),
		CopySource: aws.String("classes/k"), StorageClass: types.StorageClassReducedRedundancy})
	e.wantCode(err, "InvalidStorageClass")
}
