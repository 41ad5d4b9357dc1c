package s3

import (
	"bytes"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

const wrongETag = `"0123456789abcdef0123456789abcdef"`

func (e *env) putString(bucket, key, body string, mod func(*s3.PutObjectInput)) (*s3.PutObjectOutput, error) {
	in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)}
	if mod != nil {
		mod(in)
	}
	return e.c.PutObject(e.ctx, in)
}

func (e *env) mustPut(bucket, key, body string) string {
	e.t.Helper()
	out, err := e.putString(bucket, key, body, nil)
	if err != nil {
		e.t.Fatalf("put %s: %v", key, err)
	}
	return aws.ToString(out.ETag)
}

func (e *env) body(bucket, key string) string {
	e.t.Helper()
	g, err := e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		e.t.Fatalf("get %s: %v", key, err)
	}
	defer g.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(g.Body)
	return b.String()
}

func TestConditionalPut(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("cwb")
	etag := e.mustPut("cwb", "k", "one")
	cases := []struct {
		name, ifMatch, ifNoneMatch, want string
	}{
		{"If-None-Match * on an existing key", "", "*", "PreconditionFailed"},
		{"If-None-Match with the current ETag", "", etag, "PreconditionFailed"},
		{"If-None-Match with a list holding the current ETag", "", wrongETag + ", " + etag, "PreconditionFailed"},
		{"If-Match with another ETag", wrongETag, "", "PreconditionFailed"},
		{"If-Match and If-None-Match *", etag, "*", "PreconditionFailed"},
	}
	for _, tc := range cases {
		_, err := e.putString("cwb", "k", "two", func(in *s3.PutObjectInput) {
			if tc.ifMatch != "" {
				in.IfMatch = aws.String(tc.ifMatch)
			}
			if tc.ifNoneMatch != "" {
				in.IfNoneMatch = aws.String(tc.ifNoneMatch)
			}
		})
		if code(err) != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "filer:") {
			t.Errorf("%s: the message names the filer: %v", tc.name, err)
		}
	}
	if got := e.body("cwb", "k"); got != "one" {
		t.Fatalf("refused writes changed the object: %q", got)
	}
	_, err := e.putString("cwb", "k", "two", func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String(wrongETag) })
	if err != nil {
		t.Fatalf("If-None-Match with another ETag: %v", err)
	}
	out, err := e.putString("cwb", "k", "three", func(in *s3.PutObjectInput) { in.IfMatch = aws.String(`"` + md5hex([]byte("two")) + `"`) })
	if err != nil {
		t.Fatalf("If-Match with the current ETag: %v", err)
	}
	_, err = e.putString("cwb", "missing", "x", func(in *s3.PutObjectInput) { in.IfMatch = aws.String("*") })
	e.wantCode(err, "NoSuchKey")
	_, err = e.putString("cwb", "new", "x", func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String(etag) })
	if err != nil {
		t.Fatalf("If-None-Match with an ETag on a new key: %v", err)
	}
	// Copy: the plain If-Match / If-None-Match name the destination.
	_, err = e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: aws.String("cwb"), Key: aws.String("k"),
		CopySource: aws.String("cwb/new"), IfNoneMatch: aws.String("*")})
	e.wantCode(err, "PreconditionFailed")
	_, err = e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: aws.String("cwb"), Key: aws.String("k"),
		CopySource: aws.String("cwb/new"), IfMatch: aws.String(wrongETag)})
	e.wantCode(err, "PreconditionFailed")
	_, err = e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: aws.String("cwb"), Key: aws.String("k"),
		CopySource: aws.String("cwb/k"), MetadataDirective: types.MetadataDirectiveReplace, IfMatch: aws.String(wrongETag)})
	e.wantCode(err, "PreconditionFailed")
	if got := e.body("cwb", "k"); got != "three" {
		t.Fatalf("refused copies changed the object: %q", got)
	}
	_, err = e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: aws.String("cwb"), Key: aws.String("k"),
		CopySource: aws.String("cwb/new"), IfMatch: out.ETag})
	if err != nil {
		t.Fatalf("copy with the destination's ETag: %v", err)
	}
	// Completion.
	for _, tc := range []struct{ ifMatch, ifNoneMatch string }{{"", "*"}, {wrongETag, ""}} {
		up, err := e.c.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("cwb"), Key: aws.String("k")})
		if err != nil {
			t.Fatal(err)
		}
		p, err := e.c.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: aws.String("cwb"), Key: aws.String("k"), UploadId: up.UploadId,
			PartNumber: aws.Int32(1), Body: strings.NewReader("mp")})
		if err != nil {
			t.Fatal(err)
		}
		in := &s3.CompleteMultipartUploadInput{Bucket: aws.String("cwb"), Key: aws.String("k"), UploadId: up.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: p.ETag}}}}
		if tc.ifMatch != "" {
			in.IfMatch = aws.String(tc.ifMatch)
		}
		if tc.ifNoneMatch != "" {
			in.IfNoneMatch = aws.String(tc.ifNoneMatch)
		}
		_, err = e.c.CompleteMultipartUpload(e.ctx, in)
		e.wantCode(err, "PreconditionFailed")
	}
	if got := e.body("cwb", "k"); got != "x" {
		t.Fatalf("refused completions changed the object: %q", got)
	}
}

func TestConditionalDelete(t *testing.T) {
	e := startEnv(t, nil)
	for _, bucket := range []string{"cd-plain", "cd-versioned"} {
		e.mkBucket(bucket)
		if bucket == "cd-versioned" {
			if _, err := e.c.PutBucketVersioning(e.ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
				VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
				t.Fatal(err)
			}
		}
		b := aws.String(bucket)
		etag := e.mustPut(bucket, "k", "hello")
		h, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("k")})
		if err != nil {
			t.Fatal(err)
		}
		mod := aws.ToTime(h.LastModified)
		refused := []func(*s3.DeleteObjectInput){
			func(in *s3.DeleteObjectInput) { in.IfMatch = aws.String(wrongETag) },
			func(in *s3.DeleteObjectInput) { in.IfMatchSize = aws.Int64(4) },
			func(in *s3.DeleteObjectInput) { in.IfMatchLastModifiedTime = aws.Time(mod.Add(-time.Hour)) },
			func(in *s3.DeleteObjectInput) {
				in.IfMatch, in.IfMatchSize, in.IfMatchLastModifiedTime = aws.String(etag), aws.Int64(5), aws.Time(mod.Add(time.Hour))
			},
		}
		for i, f := range refused {
			in := &s3.DeleteObjectInput{Bucket: b, Key: aws.String("k")}
			f(in)
			_, err := e.c.DeleteObject(e.ctx, in)
			if code(err) != "PreconditionFailed" {
				t.Fatalf("%s: refused delete %d: %v, want PreconditionFailed", bucket, i, err)
			}
			if strings.Contains(err.Error(), "filer:") {
				t.Errorf("%s: refused delete %d: the message names the filer: %v", bucket, i, err)
			}
			if got := e.body(bucket, "k"); got != "hello" {
				t.Fatalf("%s: the object changed after refused delete %d: %q", bucket, i, got)
			}
		}
		_, err = e.c.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String("missing"), IfMatch: aws.String("*")})
		e.wantCode(err, "NoSuchKey")
		if _, err = e.c.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String("missing"), IfMatchSize: aws.Int64(3)}); err != nil {
			t.Fatalf("%s: a size condition on a missing key: %v (S3 answers 204)", bucket, err)
		}
		if _, err = e.c.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String("k"), IfMatch: aws.String(etag),
			IfMatchSize: aws.Int64(5), IfMatchLastModifiedTime: aws.Time(mod)}); err != nil {
			t.Fatalf("%s: delete whose conditions hold: %v", bucket, err)
		}
		if _, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("k")}); code(err) != "NotFound" {
			t.Fatalf("%s: the object is still there: %v", bucket, err)
		}
		// DeleteObjects: a per-key error for a condition that does not hold.
		e.mustPut(bucket, "a", "aaa")
		etagB := e.mustPut(bucket, "b", "bbb")
		out, err := e.c.DeleteObjects(e.ctx, &s3.DeleteObjectsInput{Bucket: b, Delete: &types.Delete{Objects: []types.ObjectIdentifier{
			{Key: aws.String("a"), ETag: aws.String(wrongETag)},
			{Key: aws.String("b"), ETag: aws.String(etagB), Size: aws.Int64(3)},
		}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Errors) != 1 || aws.ToString(out.Errors[0].Key) != "a" || aws.ToString(out.Errors[0].Code) != "PreconditionFailed" ||
			len(out.Deleted) != 1 || aws.ToString(out.Deleted[0].Key) != "b" {
			t.Fatalf("%s: DeleteObjects: errors %+v deleted %+v", bucket, out.Errors, out.Deleted)
		}
		if got := e.body(bucket, "a"); got != "aaa" {
			t.Fatalf("%s: a changed: %q", bucket, got)
		}
		out, err = e.c.DeleteObjects(e.ctx, &s3.DeleteObjectsInput{Bucket: b, Delete: &types.Delete{Objects: []types.ObjectIdentifier{
			{Key: aws.String("a"), Size: aws.Int64(2)},
		}}})
		if err != nil || len(out.Errors) != 1 || aws.ToString(out.Errors[0].Code) != "PreconditionFailed" {
			t.Fatalf("%s: DeleteObjects with a wrong Size: %v %+v", bucket, err, out)
		}
	}
}

// Concurrent compare-and-swap writes from one ETag: exactly one wins.
func TestConditionalPutConcurrent(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("cas")
	etag := e.mustPut("cas", "k", "base")
	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, refused := 0, 0
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.putString("cas", "k", "writer-"+itoa(int64(i)), func(in *s3.PutObjectInput) { in.IfMatch = aws.String(etag) })
			mu.Lock()
			defer mu.Unlock()
			switch code(err) {
			case "":
				wins++
			case "PreconditionFailed":
				refused++
			default:
				t.Errorf("writer %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 || refused != n-1 {
		t.Fatalf("%d writers won and %d were refused, want 1 and %d", wins, refused, n-1)
	}
}

// withHeader sets a request header the SDK has no field for.
func withHeader(name, value string) func(*s3.Options) {
	return func(o *s3.Options) { o.APIOptions = append(o.APIOptions, smithyhttp.AddHeaderValue(name, value)) }
}

// If-Unmodified-Since holds a write or a delete to a current object not
// modified after the date (RFC 9110 §13.1.4); If-Modified-Since is ignored
// on them (§13.1.3).
func TestConditionalUnmodifiedSince(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("cus")
	b, k := aws.String("cus"), aws.String("k")
	etag := e.mustPut("cus", "k", "one")
	e.mustPut("cus", "src", "copied")
	h, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: k})
	if err != nil {
		t.Fatal(err)
	}
	mod := aws.ToTime(h.LastModified)
	before := withHeader("If-Unmodified-Since", mod.Add(-time.Hour).UTC().Format(http.TimeFormat))
	put := func(body string, opts ...func(*s3.Options)) error {
		_, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: k, Body: strings.NewReader(body)}, opts...)
		return err
	}
	e.wantCode(put("two", before), "PreconditionFailed")
	_, err = e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: b, Key: k, CopySource: aws.String("cus/src")}, before)
	e.wantCode(err, "PreconditionFailed")
	_, err = e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: b, Key: k, CopySource: aws.String("cus/k"),
		MetadataDirective: types.MetadataDirectiveReplace}, before)
	e.wantCode(err, "PreconditionFailed")
	up, err := e.c.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: k})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.c.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: b, Key: k, UploadId: up.UploadId,
		PartNumber: aws.Int32(1), Body: strings.NewReader("mp")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.c.CompleteMultipartUpload(e.ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: k, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: p.ETag}}}}, before)
	e.wantCode(err, "PreconditionFailed")
	_, err = e.c.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: b, Key: k}, before)
	e.wantCode(err, "PreconditionFailed")
	if got := e.body("cus", "k"); got != "one" {
		t.Fatalf("refused requests changed the object: %q", got)
	}

	// Conditions that hold, or that RFC 9110 says to ignore.
	held := []struct {
		name string
		opts []func(*s3.Options)
	}{
		{"If-Unmodified-Since the object's own second", []func(*s3.Options){withHeader("If-Unmodified-Since", mod.UTC().Format(http.TimeFormat))}},
		{"If-Unmodified-Since that is not an HTTP date", []func(*s3.Options){withHeader("If-Unmodified-Since", "yesterday")}},
		{"If-Match, which overrides If-Unmodified-Since", []func(*s3.Options){before, withHeader("If-Match", etag)}},
		{"If-Modified-Since, which a PUT ignores", []func(*s3.Options){withHeader("If-Modified-Since", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))}},
	}
	for _, tc := range held {
		if err := put("one", tc.opts...); err != nil {
			t.Fatalf("put with %s: %v", tc.name, err)
		}
		h, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: k})
		if err != nil {
			t.Fatal(err)
		}
		mod = aws.ToTime(h.LastModified)
	}
	// A key with no object has no modification date: the condition is
	// ignored (RFC 9110 §13.1.4), as S3 does on a GET.
	_, err = e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("new"), Body: strings.NewReader("n")}, before)
	if err != nil {
		t.Fatalf("put of a new key with If-Unmodified-Since: %v", err)
	}
	_, err = e.c.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String("missing")}, before)
	if err != nil {
		t.Fatalf("delete of a missing key with If-Unmodified-Since: %v", err)
	}
	_, err = e.c.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: b, Key: k},
		withHeader("If-Unmodified-Since", mod.UTC().Format(http.TimeFormat)))
	if err != nil {
		t.Fatalf("delete whose If-Unmodified-Since holds: %v", err)
	}
	if _, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: k}); code(err) != "NotFound" {
		t.Fatalf("the object is still there: %v", err)
	}
}
