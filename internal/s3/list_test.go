package s3

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

func TestListObjects(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("lst")
	b := aws.String("lst")
	keys := []string{"a.txt", "a/1", "a/2", "a/b/3", "b c+d", "photos/2024/x.jpg", "photos/2025/y.jpg", "photos/readme", "z"}
	for _, k := range keys {
		if _, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String(k), Body: strings.NewReader(k)}); err != nil {
			t.Fatal(err)
		}
	}
	// V2 with delimiter, paged one item at a time.
	var objs, prefixes []string
	in := &s3.ListObjectsV2Input{Bucket: b, Delimiter: aws.String("/"), MaxKeys: aws.Int32(1)}
	for pages := 0; ; pages++ {
		out, err := e.c.ListObjectsV2(e.ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToInt32(out.KeyCount) != 1 {
			t.Fatalf("page %d: key count %d", pages, aws.ToInt32(out.KeyCount))
		}
		for _, o := range out.Contents {
			objs = append(objs, aws.ToString(o.Key))
		}
		for _, p := range out.CommonPrefixes {
			prefixes = append(prefixes, aws.ToString(p.Prefix))
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		in.ContinuationToken = out.NextContinuationToken
	}
	if !slices.Equal(objs, []string{"a.txt", "b c+d", "z"}) || !slices.Equal(prefixes, []string{"a/", "photos/"}) {
		t.Fatalf("delimited: %q %q", objs, prefixes)
	}
	// Prefix + delimiter, start-after.
	out, err := e.c.ListObjectsV2(e.ctx, &s3.ListObjectsV2Input{Bucket: b, Prefix: aws.String("photos/"), Delimiter: aws.String("/")})
	if err != nil || len(out.Contents) != 1 || aws.ToString(out.Contents[0].Key) != "photos/readme" || len(out.CommonPrefixes) != 2 {
		t.Fatalf("photos/: %+v %v", out, err)
	}
	out, err = e.c.ListObjectsV2(e.ctx, &s3.ListObjectsV2Input{Bucket: b, StartAfter: aws.String("a/b/3")})
	if err != nil || len(out.Contents) != 5 || aws.ToString(out.Contents[0].Key) != "b c+d" {
		t.Fatalf("start-after: %+v %v", out.Contents, err)
	}
	// V1 with marker and NextMarker.
	var v1 []string
	v1in := &s3.ListObjectsInput{Bucket: b, MaxKeys: aws.Int32(4)}
	for {
		o, err := e.c.ListObjects(e.ctx, v1in)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range o.Contents {
			v1 = append(v1, aws.ToString(c.Key))
		}
		if !aws.ToBool(o.IsTruncated) {
			break
		}
		if o.NextMarker == nil {
			t.Fatal("truncated V1 page without NextMarker")
		}
		v1in.Marker = o.NextMarker
	}
	if !slices.Equal(v1, keys) {
		t.Fatalf("V1: %q", v1)
	}
	// encoding-type=url encodes keys (the SDK leaves them encoded).
	o, err := e.c.ListObjects(e.ctx, &s3.ListObjectsInput{Bucket: b, Prefix: aws.String("b"), EncodingType: types.EncodingTypeUrl})
	if err != nil || len(o.Contents) != 1 {
		t.Fatalf("encoded: %v %v", o, err)
	}
	raw := aws.ToString(o.Contents[0].Key)
	dec, err := url.QueryUnescape(raw)
	if err != nil || dec != "b c+d" || raw == dec {
		t.Fatalf("encoded key %q decodes to %q (%v)", raw, dec, err)
	}
	// max-keys=0.
	out, err = e.c.ListObjectsV2(e.ctx, &s3.ListObjectsV2Input{Bucket: b, MaxKeys: aws.Int32(0)})
	if err != nil || len(out.Contents) != 0 {
		t.Fatalf("max-keys 0: %v %v", out, err)
	}
	// ListObjectVersions lists the current objects as version "null".
	vs, err := e.c.ListObjectVersions(e.ctx, &s3.ListObjectVersionsInput{Bucket: b, Prefix: aws.String("photos/")})
	if err != nil || len(vs.Versions) != 3 || aws.ToString(vs.Versions[0].VersionId) != "null" {
		t.Fatalf("versions: %v %v", vs, err)
	}
}
