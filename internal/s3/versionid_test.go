package s3

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// A bucket that never had versioning answers no version id on any write
// or delete path, as S3 does.
func TestNoVersionIDWhenUnversioned(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("plainv")
	b := aws.String("plainv")
	check := func(what string, resp *string) {
		t.Helper()
		if resp != nil {
			t.Errorf("%s in an unversioned bucket answered version id %q", what, *resp)
		}
	}
	put, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("k"), Body: strings.NewReader("x")})
	if err != nil {
		t.Fatal(err)
	}
	check("PutObject", put.VersionId)
	put, err = e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("d/"), Body: strings.NewReader("")})
	if err != nil {
		t.Fatal(err)
	}
	check("PutObject of a directory object", put.VersionId)
	cp, err := e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String("k2"), CopySource: aws.String("plainv/k")})
	if err != nil {
		t.Fatal(err)
	}
	check("CopyObject", cp.VersionId)
	cp, err = e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String("k2"), CopySource: aws.String("plainv/k2"),
		MetadataDirective: types.MetadataDirectiveReplace})
	if err != nil {
		t.Fatal(err)
	}
	check("CopyObject onto itself", cp.VersionId)
	up, err := e.c.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("mp")})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.c.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: b, Key: aws.String("mp"), UploadId: up.UploadId,
		PartNumber: aws.Int32(1), Body: strings.NewReader("part")})
	if err != nil {
		t.Fatal(err)
	}
	done, err := e.c.CompleteMultipartUpload(e.ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: aws.String("mp"), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: p.ETag}}}})
	if err != nil {
		t.Fatal(err)
	}
	check("CompleteMultipartUpload", done.VersionId)
	for _, k := range []string{"k", "mp"} {
		h, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String(k)})
		if err != nil {
			t.Fatal(err)
		}
		check("HeadObject", h.VersionId)
	}
	del, err := e.c.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	check("DeleteObject", del.VersionId)
	dels, err := e.c.DeleteObjects(e.ctx, &s3.DeleteObjectsInput{Bucket: b, Delete: &types.Delete{Objects: []types.ObjectIdentifier{
		{Key: aws.String("k2")}, {Key: aws.String("missing")}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dels.Deleted {
		check("DeleteObjects", d.VersionId)
		check("DeleteObjects (marker)", d.DeleteMarkerVersionId)
		if aws.ToBool(d.DeleteMarker) {
			t.Errorf("DeleteObjects reports a delete marker in an unversioned bucket")
		}
	}
}
