package s3

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// A key may be an object and a prefix of other keys at once, as in S3:
// "a", "a/" and "a/b" all exist, through every kind of write, and are
// read, listed and deleted each on its own.

func (e *env) getString(bucket, key, vid string) (string, error) {
	e.t.Helper()
	in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
	if vid != "" {
		in.VersionId = aws.String(vid)
	}
	out, err := e.c.GetObject(e.ctx, in)
	if err != nil {
		return "", err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	return string(b), err
}

func (e *env) mustGet(bucket, key, want string) {
	e.t.Helper()
	if got, err := e.getString(bucket, key, ""); err != nil || got != want {
		e.t.Fatalf("GET %q = %q, %v; want %q", key, got, err, want)
	}
}

// listV2 lists every page with continuation tokens.
func (e *env) listV2(in s3.ListObjectsV2Input) (keys, cps []string) {
	e.t.Helper()
	for page := 0; page < 200; page++ {
		out, err := e.c.ListObjectsV2(e.ctx, &in)
		if err != nil {
			e.t.Fatalf("list %+v: %v", in, err)
		}
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		for _, p := range out.CommonPrefixes {
			cps = append(cps, aws.ToString(p.Prefix))
		}
		if !aws.ToBool(out.IsTruncated) {
			return keys, cps
		}
		in.ContinuationToken = out.NextContinuationToken
	}
	e.t.Fatal("listing does not end")
	return
}

// listV1 lists every page with markers (NextMarker, or the last key
// without a delimiter, as clients do).
func (e *env) listV1(in s3.ListObjectsInput) (keys, cps []string) {
	e.t.Helper()
	for page := 0; page < 200; page++ {
		out, err := e.c.ListObjects(e.ctx, &in)
		if err != nil {
			e.t.Fatalf("list %+v: %v", in, err)
		}
		last := ""
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
			last = aws.ToString(o.Key)
		}
		for _, p := range out.CommonPrefixes {
			cps = append(cps, aws.ToString(p.Prefix))
		}
		if !aws.ToBool(out.IsTruncated) {
			return keys, cps
		}
		if out.NextMarker != nil {
			last = aws.ToString(out.NextMarker)
		}
		in.Marker = aws.String(last)
	}
	e.t.Fatal("listing does not end")
	return
}

func TestSDKObjectAndPrefixSameKey(t *testing.T) {
	e := startEnv(t, nil)
	for i, state := range []types.BucketVersioningStatus{"", types.BucketVersioningStatusEnabled, types.BucketVersioningStatusSuspended} {
		for j, reverse := range []bool{false, true} {
			bucket := fmt.Sprintf("collide-%d-%d", i, j)
			e.mkBucket(bucket)
			if state != "" {
				e.enableVersioning(bucket, state)
			}
			testSameKey(t, e, bucket, state, reverse)
		}
	}
}

func testSameKey(t *testing.T, e *env, bucket string, state types.BucketVersioningStatus, reverse bool) {
	b := aws.String(bucket)
	// Written through PutObject, a multipart upload, POST Object and
	// CopyObject, in one order or the other.
	writes := []func(){
		func() { e.putV(bucket, "a", "first a") },
		func() { e.putV(bucket, "a/", "dir a/") },
		func() {
			up, err := e.c.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("a/b")})
			if err != nil {
				t.Fatal(err)
			}
			p, err := e.c.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: b, Key: aws.String("a/b"), UploadId: up.UploadId,
				PartNumber: aws.Int32(1), Body: strings.NewReader("multipart a/b")})
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.c.CompleteMultipartUpload(e.ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: aws.String("a/b"), UploadId: up.UploadId,
				MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: p.ETag}}}})
			if err != nil {
				t.Fatal(err)
			}
		},
		func() {
			fields := policyV4(t, time.Now().Add(time.Hour),
				[]any{map[string]string{"bucket": bucket}, []any{"starts-with", "$key", "a/b/"}},
				formField{"key", "a/b/c"})
			if resp, body := e.postForm(bucket, fields, "c", []byte("posted a/b/c")); resp.StatusCode/100 != 2 {
				t.Fatalf("POST a/b/c: %d %s", resp.StatusCode, body)
			}
		},
		func() {
			e.putV(bucket, "src", "copied a0")
			if _, err := e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String("a0"), CopySource: aws.String(bucket + "/src")}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.c.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String("src")}); err != nil {
				t.Fatal(err)
			}
		},
	}
	if reverse {
		slices.Reverse(writes)
	}
	for _, w := range writes {
		w()
	}
	want := map[string]string{"a": "first a", "a/": "dir a/", "a/b": "multipart a/b", "a/b/c": "posted a/b/c", "a0": "copied a0"}
	for k, v := range want {
		e.mustGet(bucket, k, v)
	}
	all := []string{"a", "a/", "a/b", "a/b/c", "a0"}
	if keys, cps := e.listV2(s3.ListObjectsV2Input{Bucket: b}); !slices.Equal(keys, all) || cps != nil {
		t.Fatalf("%s: V2 listing %q %q", bucket, keys, cps)
	}
	for _, max := range []int32{1, 2, 3} {
		if keys, _ := e.listV2(s3.ListObjectsV2Input{Bucket: b, MaxKeys: aws.Int32(max)}); !slices.Equal(keys, all) {
			t.Fatalf("%s: V2 listing by %d: %q", bucket, max, keys)
		}
		if keys, _ := e.listV1(s3.ListObjectsInput{Bucket: b, MaxKeys: aws.Int32(max)}); !slices.Equal(keys, all) {
			t.Fatalf("%s: V1 listing by %d: %q", bucket, max, keys)
		}
		keys, cps := e.listV2(s3.ListObjectsV2Input{Bucket: b, Delimiter: aws.String("/"), MaxKeys: aws.Int32(max)})
		if !slices.Equal(keys, []string{"a", "a0"}) || !slices.Equal(cps, []string{"a/"}) {
			t.Fatalf("%s: V2 listing with delimiter by %d: %q %q", bucket, max, keys, cps)
		}
		keys, cps = e.listV1(s3.ListObjectsInput{Bucket: b, Delimiter: aws.String("/"), MaxKeys: aws.Int32(max)})
		if !slices.Equal(keys, []string{"a", "a0"}) || !slices.Equal(cps, []string{"a/"}) {
			t.Fatalf("%s: V1 listing with delimiter by %d: %q %q", bucket, max, keys, cps)
		}
	}
	if keys, _ := e.listV2(s3.ListObjectsV2Input{Bucket: b, StartAfter: aws.String("a")}); !slices.Equal(keys, all[1:]) {
		t.Fatalf("%s: V2 listing after a: %q", bucket, keys)
	}
	if keys, cps := e.listV2(s3.ListObjectsV2Input{Bucket: b, Prefix: aws.String("a/"), Delimiter: aws.String("/")}); !slices.Equal(keys, []string{"a/", "a/b"}) || !slices.Equal(cps, []string{"a/b/"}) {
		t.Fatalf("%s: V2 listing of a/: %q %q", bucket, keys, cps)
	}

	// Each key's attributes are its own.
	if _, err := e.c.PutObjectTagging(e.ctx, &s3.PutObjectTaggingInput{Bucket: b, Key: aws.String("a"),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}}); err != nil {
		t.Fatal(err)
	}
	if tg, err := e.c.GetObjectTagging(e.ctx, &s3.GetObjectTaggingInput{Bucket: b, Key: aws.String("a/b")}); err != nil || len(tg.TagSet) != 0 {
		t.Fatalf("tags of a/b: %+v %v", tg, err)
	}
	if tg, err := e.c.GetObjectTagging(e.ctx, &s3.GetObjectTaggingInput{Bucket: b, Key: aws.String("a")}); err != nil || len(tg.TagSet) != 1 {
		t.Fatalf("tags of a: %+v %v", tg, err)
	}
	if _, err := e.c.PutObjectAcl(e.ctx, &s3.PutObjectAclInput{Bucket: b, Key: aws.String("a"), ACL: types.ObjectCannedACLPublicRead}); err != nil {
		t.Fatal(err)
	}
	for k, grants := range map[string]int{"a": 2, "a/b": 1} {
		acl, err := e.c.GetObjectAcl(e.ctx, &s3.GetObjectAclInput{Bucket: b, Key: aws.String(k)})
		if err != nil || len(acl.Grants) != grants {
			t.Fatalf("ACL of %q: %+v %v", k, acl, err)
		}
	}
	attrs, err := e.c.GetObjectAttributes(e.ctx, &s3.GetObjectAttributesInput{Bucket: b, Key: aws.String("a"),
		ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesObjectSize, types.ObjectAttributesObjectParts}})
	if err != nil || aws.ToInt64(attrs.ObjectSize) != int64(len("first a")) || attrs.ObjectParts != nil {
		t.Fatalf("attributes of a: %+v %v", attrs, err)
	}
	h, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("a/b"), PartNumber: aws.Int32(1)})
	if err != nil || aws.ToInt32(h.PartsCount) != 1 || aws.ToInt64(h.ContentLength) != int64(len("multipart a/b")) {
		t.Fatalf("head a/b: %+v %v", h, err)
	}

	// Versions: a second "a", the first still readable by id when kept.
	vid := e.putV(bucket, "a", "second a")
	e.mustGet(bucket, "a", "second a")
	if vid != "" {
		if got, err := e.getString(bucket, "a", vid); err != nil || got != "second a" {
			t.Fatalf("%s: a by version id: %q %v", bucket, got, err)
		}
	}
	vs, err := e.c.ListObjectVersions(e.ctx, &s3.ListObjectVersionsInput{Bucket: b})
	if err != nil {
		t.Fatal(err)
	}
	var vkeys []string
	for _, v := range vs.Versions {
		vkeys = append(vkeys, aws.ToString(v.Key))
	}
	wantV := []string{"a", "a/", "a/b", "a/b/c", "a0"}
	if state == types.BucketVersioningStatusEnabled {
		wantV = []string{"a", "a", "a/", "a/b", "a/b/c", "a0", "src"} // src's version under its delete marker
	}
	if !slices.Equal(vkeys, wantV) || aws.ToString(vs.Versions[0].VersionId) != vid && vid != "" {
		t.Fatalf("%s: versions %q", bucket, vkeys)
	}

	// Deletes, each leaving the others readable.
	del := func(k string) {
		t.Helper()
		if _, err := e.c.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String(k)}); err != nil {
			t.Fatal(err)
		}
		delete(want, k)
		_, err := e.getString(bucket, k, "")
		e.wantCode(err, "NoSuchKey")
		for k, v := range want {
			e.mustGet(bucket, k, v)
		}
	}
	want["a"] = "second a"
	del("a/b")
	if keys, cps := e.listV2(s3.ListObjectsV2Input{Bucket: b, Delimiter: aws.String("/")}); !slices.Equal(keys, []string{"a", "a0"}) || !slices.Equal(cps, []string{"a/"}) {
		t.Fatalf("%s: after deleting a/b: %q %q", bucket, keys, cps)
	}
	del("a")
	if keys, cps := e.listV2(s3.ListObjectsV2Input{Bucket: b, Delimiter: aws.String("/")}); !slices.Equal(keys, []string{"a0"}) || !slices.Equal(cps, []string{"a/"}) {
		t.Fatalf("%s: after deleting a: %q %q", bucket, keys, cps)
	}
	if state == types.BucketVersioningStatusEnabled {
		// "a" has a delete marker over its two versions, beside "a/...".
		h, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("a"), VersionId: aws.String(vid)})
		if err != nil || aws.ToString(h.VersionId) != vid {
			t.Fatalf("%s: head a by version id under its delete marker: %+v %v", bucket, h, err)
		}
		vs, err := e.c.ListObjectVersions(e.ctx, &s3.ListObjectVersionsInput{Bucket: b, Prefix: aws.String("a"), Delimiter: aws.String("/")})
		if err != nil {
			t.Fatal(err)
		}
		if len(vs.DeleteMarkers) != 1 || aws.ToString(vs.DeleteMarkers[0].Key) != "a" || !aws.ToBool(vs.DeleteMarkers[0].IsLatest) ||
			len(vs.Versions) != 3 || len(vs.CommonPrefixes) != 1 || aws.ToString(vs.CommonPrefixes[0].Prefix) != "a/" {
			t.Fatalf("%s: versions of a: %+v", bucket, vs)
		}
		// Removing the marker brings "a" back.
		if _, err := e.c.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String("a"), VersionId: vs.DeleteMarkers[0].VersionId}); err != nil {
			t.Fatal(err)
		}
		e.mustGet(bucket, "a", "second a")
		del("a")
	}
	del("a/b/c")
	del("a/")
	if keys, _ := e.listV2(s3.ListObjectsV2Input{Bucket: b}); !slices.Equal(keys, []string{"a0"}) {
		t.Fatalf("%s: at the end: %q", bucket, keys)
	}
}

// TestSDKRandomKeysMatchModel puts and deletes random keys that collide in
// every way and compares ListObjectsV2 and ListObjects (random delimiters,
// page sizes, continuation tokens and markers) and GETs with a map of what
// S3 would hold, in each versioning state.
func TestSDKRandomKeysMatchModel(t *testing.T) {
	e := startEnv(t, nil)
	alphabet := []string{"a", "a/", "a/b", "a/b/", "ab", "a/b/c", "a!"}
	for _, state := range []types.BucketVersioningStatus{"", types.BucketVersioningStatusEnabled, types.BucketVersioningStatusSuspended} {
		bucket := "random-" + strings.ToLower(string(state)) + "x"
		e.mkBucket(bucket)
		if state != "" {
			e.enableVersioning(bucket, state)
		}
		b := aws.String(bucket)
		rng := rand.New(rand.NewPCG(3, uint64(len(state))))
		model := map[string]string{}
		for step := 0; step < 60; step++ {
			k := alphabet[rng.IntN(len(alphabet))]
			if rng.IntN(3) == 0 {
				if _, err := e.c.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String(k)}); err != nil {
					t.Fatal(err)
				}
				delete(model, k)
			} else {
				body := fmt.Sprintf("%s@%d", k, step)
				e.putV(bucket, k, body)
				model[k] = body
			}
			for _, k := range alphabet {
				got, err := e.getString(bucket, k, "")
				if want, ok := model[k]; ok && (err != nil || got != want) || !ok && code(err) != "NoSuchKey" {
					t.Fatalf("%s step %d: GET %q = %q, %v; want %q", bucket, step, k, got, err, model[k])
				}
			}
			var live []string
			for k := range model {
				live = append(live, k)
			}
			sort.Strings(live)
			delim := []string{"", "/"}[rng.IntN(2)]
			in := s3.ListObjectsV2Input{Bucket: b, MaxKeys: aws.Int32(1 + rng.Int32N(3))}
			wantKeys, wantCPs := live, []string(nil)
			if delim != "" {
				in.Delimiter = aws.String(delim)
				wantKeys = nil
				for _, k := range live {
					if i := strings.Index(k, delim); i >= 0 {
						if cp := k[:i+1]; !slices.Contains(wantCPs, cp) {
							wantCPs = append(wantCPs, cp)
						}
					} else {
						wantKeys = append(wantKeys, k)
					}
				}
			}
			if keys, cps := e.listV2(in); !slices.Equal(keys, wantKeys) || !slices.Equal(cps, wantCPs) {
				t.Fatalf("%s step %d, delimiter %q: listing %q %q, want %q %q", bucket, step, delim, keys, cps, wantKeys, wantCPs)
			}
			in1 := s3.ListObjectsInput{Bucket: b, MaxKeys: in.MaxKeys, Delimiter: in.Delimiter}
			if keys, cps := e.listV1(in1); !slices.Equal(keys, wantKeys) || !slices.Equal(cps, wantCPs) {
				t.Fatalf("%s step %d, delimiter %q: V1 listing %q %q, want %q %q", bucket, step, delim, keys, cps, wantKeys, wantCPs)
			}
		}
	}
}
