package s3

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/filer"
)

func (e *env) enableVersioning(bucket string, status types.BucketVersioningStatus) {
	e.t.Helper()
	_, err := e.c.PutBucketVersioning(e.ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: status}})
	if err != nil {
		e.t.Fatalf("put versioning %s: %v", status, err)
	}
}

func (e *env) putV(bucket, key, body string) string {
	e.t.Helper()
	out, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)})
	if err != nil {
		e.t.Fatalf("put %s: %v", key, err)
	}
	return aws.ToString(out.VersionId)
}

func (e *env) getV(bucket, key, vid string) (string, error) {
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
	if vid != "" && aws.ToString(out.VersionId) != vid {
		e.t.Fatalf("GET %s?versionId=%s answered version %q", key, vid, aws.ToString(out.VersionId))
	}
	return string(b), err
}

// versions lists all versions of bucket as "key:vid:latest[:dm]" strings.
func (e *env) versions(bucket, prefix string) []string {
	e.t.Helper()
	out, err := e.c.ListObjectVersions(e.ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	if err != nil {
		e.t.Fatal(err)
	}
	return flattenVersions(out)
}

func flattenVersions(out *s3.ListObjectVersionsOutput) []string {
	type item struct {
		key, vid string
		latest   bool
		dm       bool
		t        time.Time
	}
	var all []item
	for _, v := range out.Versions {
		all = append(all, item{aws.ToString(v.Key), aws.ToString(v.VersionId), aws.ToBool(v.IsLatest), false, aws.ToTime(v.LastModified)})
	}
	for _, d := range out.DeleteMarkers {
		all = append(all, item{aws.ToString(d.Key), aws.ToString(d.VersionId), aws.ToBool(d.IsLatest), true, aws.ToTime(d.LastModified)})
	}
	// The SDK splits the interleaved list; restore key order, then
	// newest first (latest first, then by version id: ids sort newest
	// first; the null version sorts by its time).
	slices.SortStableFunc(all, func(a, b item) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		if a.latest != b.latest {
			if a.latest {
				return -1
			}
			return 1
		}
		return b.t.Compare(a.t)
	})
	var s []string
	for _, it := range all {
		x := fmt.Sprintf("%s:%s:%v", it.key, it.vid, it.latest)
		if it.dm {
			x += ":dm"
		}
		s = append(s, x)
	}
	return s
}

func TestVersioningStates(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("vsb")
	resp, body := e.raw("GET", "/vsb?versioning", nil, nil)
	if resp.StatusCode != 200 || strings.Contains(string(body), "<Status>") {
		t.Fatalf("unversioned bucket: %d %s", resp.StatusCode, body)
	}
	for _, st := range []types.BucketVersioningStatus{types.BucketVersioningStatusEnabled, types.BucketVersioningStatusSuspended, types.BucketVersioningStatusEnabled} {
		e.enableVersioning("vsb", st)
		out, err := e.c.GetBucketVersioning(e.ctx, &s3.GetBucketVersioningInput{Bucket: aws.String("vsb")})
		if err != nil || out.Status != st {
			t.Fatalf("after %s: %v %v", st, out.Status, err)
		}
	}
	_, err := e.c.GetBucketVersioning(e.ctx, &s3.GetBucketVersioningInput{Bucket: aws.String("nope")})
	e.wantCode(err, "NoSuchBucket")

	// An unversioned bucket sends no version ids and lists "null".
	e.mkBucket("plain")
	resp, _ = e.raw("PUT", "/plain/k", []byte("x"), nil)
	if resp.StatusCode != 200 || resp.Header.Get("x-amz-version-id") != "" {
		t.Fatalf("unversioned PUT: %d, version %q", resp.StatusCode, resp.Header.Get("x-amz-version-id"))
	}
	if got := e.versions("plain", ""); !slices.Equal(got, []string{"k:null:true"}) {
		t.Fatalf("versions of an unversioned bucket: %v", got)
	}
}

func TestVersioningEnabled(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("veb")
	e.putV("veb", "k", "v0") // before versioning: the null version
	e.enableVersioning("veb", types.BucketVersioningStatusEnabled)
	v1 := e.putV("veb", "k", "v1")
	v2 := e.putV("veb", "k", "v2")
	if v1 == "" || v2 == "" || v1 == v2 || v1 == "null" {
		t.Fatalf("version ids %q %q", v1, v2)
	}
	if !(v2 < v1) {
		t.Fatalf("version ids do not sort newest first: %q then %q", v1, v2)
	}
	if got, err := e.getV("veb", "k", ""); err != nil || got != "v2" {
		t.Fatalf("latest: %q %v", got, err)
	}
	for vid, want := range map[string]string{v1: "v1", v2: "v2", "null": "v0"} {
		if got, err := e.getV("veb", "k", vid); err != nil || got != want {
			t.Fatalf("version %s: %q %v, want %q", vid, got, err, want)
		}
		h, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: aws.String("veb"), Key: aws.String("k"), VersionId: aws.String(vid)})
		if err != nil || aws.ToInt64(h.ContentLength) != 2 {
			t.Fatalf("head version %s: %v", vid, err)
		}
	}
	if got := e.versions("veb", ""); !slices.Equal(got, []string{"k:" + v2 + ":true", "k:" + v1 + ":false", "k:null:false"}) {
		t.Fatalf("versions: %v", got)
	}

	// DELETE without a version adds a delete marker.
	d, err := e.c.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: aws.String("veb"), Key: aws.String("k")})
	if err != nil || !aws.ToBool(d.DeleteMarker) || aws.ToString(d.VersionId) == "" {
		t.Fatalf("delete: %+v %v", d, err)
	}
	dm := aws.ToString(d.VersionId)
	_, err = e.getV("veb", "k", "")
	e.wantCode(err, "NoSuchKey")
	resp, _ := e.raw("GET", "/veb/k", nil, nil)
	if resp.StatusCode != 404 || resp.Header.Get("x-amz-delete-marker") != "true" || resp.Header.Get("x-amz-version-id") != dm {
		t.Fatalf("GET of a deleted key: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = e.raw("HEAD", "/veb/k", nil, nil)
	if resp.StatusCode != 404 || resp.Header.Get("x-amz-delete-marker") != "true" {
		t.Fatalf("HEAD of a deleted key: %d %v", resp.StatusCode, resp.Header)
	}
	resp, body := e.raw("GET", "/veb/k?versionId="+dm, nil, nil)
	if resp.StatusCode != 405 || !strings.Contains(string(body), "MethodNotAllowed") || resp.Header.Get("x-amz-delete-marker") != "true" {
		t.Fatalf("GET of a delete marker: %d %s", resp.StatusCode, body)
	}
	if got, err := e.getV("veb", "k", v1); err != nil || got != "v1" {
		t.Fatalf("old version after delete: %q %v", got, err)
	}
	l, err := e.c.ListObjectsV2(e.ctx, &s3.ListObjectsV2Input{Bucket: aws.String("veb")})
	if err != nil || len(l.Contents) != 0 {
		t.Fatalf("deleted key listed: %+v %v", l.Contents, err)
	}
	_, err = e.c.DeleteBucket(e.ctx, &s3.DeleteBucketInput{Bucket: aws.String("veb")})
	e.wantCode(err, "BucketNotEmpty")

	// Deleting the marker brings v2 back; deleting v2 makes v1 current.
	d, err = e.c.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: aws.String("veb"), Key: aws.String("k"), VersionId: aws.String(dm)})
	if err != nil || !aws.ToBool(d.DeleteMarker) || aws.ToString(d.VersionId) != dm {
		t.Fatalf("delete marker removal: %+v %v", d, err)
	}
	if got, err := e.getV("veb", "k", ""); err != nil || got != "v2" {
		t.Fatalf("after removing the marker: %q %v", got, err)
	}
	if _, err := e.c.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: aws.String("veb"), Key: aws.String("k"), VersionId: aws.String(v2)}); err != nil {
		t.Fatal(err)
	}
	if got, err := e.getV("veb", "k", ""); err != nil || got != "v1" {
		t.Fatalf("after deleting the latest: %q %v", got, err)
	}
	_, err = e.getV("veb", "k", v2)
	e.wantCode(err, "NoSuchVersion")
	for _, vid := range []string{"null", v1} {
		if _, err := e.c.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: aws.String("veb"), Key: aws.String("k"), VersionId: aws.String(vid)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.versions("veb", ""); len(got) != 0 {
		t.Fatalf("versions left: %v", got)
	}
	if _, err := e.c.DeleteBucket(e.ctx, &s3.DeleteBucketInput{Bucket: aws.String("veb")}); err != nil {
		t.Fatalf("delete of an emptied bucket: %v", err)
	}
}

// TestVersionChunksCollected checks that a version deleted by id gives
// its chunks back to the volume servers.
func TestVersionChunksCollected(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("gcb")
	e.enableVersioning("gcb", types.BucketVersioningStatusEnabled)
	big := bytes.Repeat([]byte("0123456789abcdef"), 3*chunkSize/16) // three chunks
	out, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("gcb"), Key: aws.String("big"), Body: bytes.NewReader(big)})
	if err != nil {
		t.Fatal(err)
	}
	old := aws.ToString(out.VersionId)
	e.putV("gcb", "big", "small")
	f := e.fs.Filer()
	dirs, _, err := f.ListEntries(e.ctx, "/buckets/.versions/gcb", filer.ListOptions{})
	if err != nil || len(dirs) != 1 {
		t.Fatalf("versions directory: %v %v", dirs, err)
	}
	ent, err := f.FindEntry(e.ctx, dirs[0].Path+"/"+old)
	if err != nil || len(ent.Chunks) == 0 {
		t.Fatalf("archived version: %v", err)
	}
	// Still readable while noncurrent.
	if got, err := e.getV("gcb", "big", old); err != nil || got != string(big) {
		t.Fatalf("noncurrent version: %d bytes, %v", len(got), err)
	}
	if _, err := e.c.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: aws.String("gcb"), Key: aws.String("big"), VersionId: aws.String(old)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.CollectGarbage(e.ctx); err != nil {
		t.Fatal(err)
	}
	resolved, _ := chunk.Resolve(e.ctx, f.Blobs(), ent.Chunks, 0, -1)
	for _, c := range append(resolved, ent.Chunks...) {
		if c.Manifest {
			continue
		}
		rc, err := f.Blobs().Open(e.ctx, c.FID, 0, -1)
		if err == nil {
			_, err = io.ReadAll(rc)
			rc.Close()
		}
		if err == nil {
			t.Fatalf("chunk %s of a deleted version is still readable", c.FID)
		}
	}
	if got, err := e.getV("gcb", "big", ""); err != nil || got != "small" {
		t.Fatalf("current version after deleting the old one: %q %v", got, err)
	}
}

func TestVersioningSuspended(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("sub")
	e.enableVersioning("sub", types.BucketVersioningStatusEnabled)
	v1 := e.putV("sub", "k", "v1")
	e.enableVersioning("sub", types.BucketVersioningStatusSuspended)
	if vid := e.putV("sub", "k", "n1"); vid != "null" {
		t.Fatalf("suspended PUT version %q, want null", vid)
	}
	if vid := e.putV("sub", "k", "n2"); vid != "null" {
		t.Fatalf("suspended PUT version %q, want null", vid)
	}
	if got := e.versions("sub", ""); !slices.Equal(got, []string{"k:null:true", "k:" + v1 + ":false"}) {
		t.Fatalf("the null version was not replaced: %v", got)
	}
	if got, _ := e.getV("sub", "k", "null"); got != "n2" {
		t.Fatalf("null version %q", got)
	}
	d, err := e.c.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: aws.String("sub"), Key: aws.String("k")})
	if err != nil || !aws.ToBool(d.DeleteMarker) || aws.ToString(d.VersionId) != "null" {
		t.Fatalf("suspended delete: %+v %v", d, err)
	}
	if got := e.versions("sub", ""); !slices.Equal(got, []string{"k:null:true:dm", "k:" + v1 + ":false"}) {
		t.Fatalf("after a suspended delete: %v", got)
	}
	// Re-enabled: the null marker becomes noncurrent, and a null version
	// written while suspended over a versioned one keeps the versioned one.
	e.enableVersioning("sub", types.BucketVersioningStatusEnabled)
	v3 := e.putV("sub", "k", "v3")
	if got := e.versions("sub", ""); !slices.Equal(got, []string{"k:" + v3 + ":true", "k:null:false:dm", "k:" + v1 + ":false"}) {
		t.Fatalf("after re-enabling: %v", got)
	}
	e.enableVersioning("sub", types.BucketVersioningStatusSuspended)
	e.putV("sub", "k", "n3") // replaces the noncurrent null marker
	if got := e.versions("sub", ""); !slices.Equal(got, []string{"k:null:true", "k:" + v3 + ":false", "k:" + v1 + ":false"}) {
		t.Fatalf("suspended write over a versioned object: %v", got)
	}
}

func TestVersionedCopyAndMultipart(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("cmb")
	e.enableVersioning("cmb", types.BucketVersioningStatusEnabled)
	v1 := e.putV("cmb", "k", "first")
	e.putV("cmb", "k", "second")
	// Restore the first version by copying it onto the key.
	c, err := e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: aws.String("cmb"), Key: aws.String("k"),
		CopySource: aws.String("cmb/k?versionId=" + v1)})
	if err != nil || aws.ToString(c.CopySourceVersionId) != v1 || aws.ToString(c.VersionId) == "" || aws.ToString(c.VersionId) == v1 {
		t.Fatalf("copy of a version: %+v %v", c, err)
	}
	if got, _ := e.getV("cmb", "k", ""); got != "first" {
		t.Fatalf("restored content %q", got)
	}
	if n := len(e.versions("cmb", "k")); n != 3 {
		t.Fatalf("%d versions after the copy, want 3", n)
	}
	_, err = e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: aws.String("cmb"), Key: aws.String("x"),
		CopySource: aws.String("cmb/k?versionId=0123456789abcdef0123456789abcdef")})
	e.wantCode(err, "NoSuchVersion")

	// Multipart completion creates a version too.
	mu, err := e.c.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("cmb"), Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.c.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: aws.String("cmb"), Key: aws.String("k"), UploadId: mu.UploadId,
		PartNumber: aws.Int32(1), Body: strings.NewReader("multipart")})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := e.c.CompleteMultipartUpload(e.ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("cmb"), Key: aws.String("k"), UploadId: mu.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: p.ETag}}}})
	if err != nil || aws.ToString(cp.VersionId) == "" {
		t.Fatalf("complete: %+v %v", cp, err)
	}
	vs := e.versions("cmb", "k")
	if len(vs) != 4 || vs[0] != "k:"+aws.ToString(cp.VersionId)+":true" {
		t.Fatalf("versions after multipart: %v", vs)
	}
	if got, _ := e.getV("cmb", "k", v1); got != "first" {
		t.Fatalf("first version %q", got)
	}
	// Tags belong to one version.
	_, err = e.c.PutObjectTagging(e.ctx, &s3.PutObjectTaggingInput{Bucket: aws.String("cmb"), Key: aws.String("k"), VersionId: aws.String(v1),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("a"), Value: aws.String("b")}}}})
	if err != nil {
		t.Fatal(err)
	}
	for vid, want := range map[string]int{v1: 1, "": 0} {
		in := &s3.GetObjectTaggingInput{Bucket: aws.String("cmb"), Key: aws.String("k")}
		if vid != "" {
			in.VersionId = aws.String(vid)
		}
		tg, err := e.c.GetObjectTagging(e.ctx, in)
		if err != nil || len(tg.TagSet) != want {
			t.Fatalf("tags of version %q: %v %v", vid, tg, err)
		}
	}
}

func TestListObjectVersionsPaging(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("lvb")
	e.enableVersioning("lvb", types.BucketVersioningStatusEnabled)
	for _, k := range []string{"a", "b", "a", "d/x", "b", "b", "d/y", "a.txt", "gone/z"} {
		e.putV("lvb", k, k)
	}
	if _, err := e.c.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: aws.String("lvb"), Key: aws.String("gone/z")}); err != nil {
		t.Fatal(err)
	}
	all := e.versions("lvb", "")
	wantKeys := []string{"a", "a", "a.txt", "b", "b", "b", "d/x", "d/y", "gone/z", "gone/z"}
	var keys []string
	for _, v := range all {
		keys = append(keys, strings.SplitN(v, ":", 2)[0])
	}
	if !slices.Equal(keys, wantKeys) {
		t.Fatalf("keys %v, want %v", keys, wantKeys)
	}
	// Page through with max-keys 2 and the markers: the same list.
	for _, size := range []int32{1, 2, 3} {
		var paged []string
		in := &s3.ListObjectVersionsInput{Bucket: aws.String("lvb"), MaxKeys: aws.Int32(size)}
		for i := 0; ; i++ {
			out, err := e.c.ListObjectVersions(e.ctx, in)
			if err != nil || i > 20 {
				t.Fatalf("page %d: %v", i, err)
			}
			if n := len(out.Versions) + len(out.DeleteMarkers); n > int(size) {
				t.Fatalf("page of %d entries with max-keys %d", n, size)
			}
			paged = append(paged, flattenVersions(out)...)
			if !aws.ToBool(out.IsTruncated) {
				break
			}
			in.KeyMarker, in.VersionIdMarker = out.NextKeyMarker, out.NextVersionIdMarker
		}
		if !slices.Equal(paged, all) {
			t.Fatalf("max-keys %d pages:\n%v\nwant\n%v", size, paged, all)
		}
	}
	// Delimiter: common prefixes, including one that holds only a delete
	// marker; ListObjects hides that one.
	out, err := e.c.ListObjectVersions(e.ctx, &s3.ListObjectVersionsInput{Bucket: aws.String("lvb"), Delimiter: aws.String("/")})
	if err != nil || len(out.CommonPrefixes) != 2 || aws.ToString(out.CommonPrefixes[1].Prefix) != "gone/" || len(out.Versions) != 6 {
		t.Fatalf("delimited versions: %+v %v", out, err)
	}
	lo, err := e.c.ListObjectsV2(e.ctx, &s3.ListObjectsV2Input{Bucket: aws.String("lvb"), Delimiter: aws.String("/")})
	if err != nil || len(lo.CommonPrefixes) != 1 || aws.ToString(lo.CommonPrefixes[0].Prefix) != "d/" || len(lo.Contents) != 3 {
		t.Fatalf("delimited objects: %+v %v", lo, err)
	}
	lo, err = e.c.ListObjectsV2(e.ctx, &s3.ListObjectsV2Input{Bucket: aws.String("lvb")})
	if err != nil || len(lo.Contents) != 5 {
		t.Fatalf("objects: %d %v", len(lo.Contents), err)
	}
	if got := e.versions("lvb", "d/"); len(got) != 2 || !strings.HasPrefix(got[0], "d/x:") {
		t.Fatalf("prefix d/: %v", got)
	}
	_, err = e.c.ListObjectVersions(e.ctx, &s3.ListObjectVersionsInput{Bucket: aws.String("lvb"), VersionIdMarker: aws.String("null")})
	e.wantCode(err, "InvalidArgument")
}

func TestDeleteObjectsVersions(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("dmb")
	e.enableVersioning("dmb", types.BucketVersioningStatusEnabled)
	a1 := e.putV("dmb", "a", "1")
	a2 := e.putV("dmb", "a", "2")
	e.putV("dmb", "b", "1")
	out, err := e.c.DeleteObjects(e.ctx, &s3.DeleteObjectsInput{Bucket: aws.String("dmb"), Delete: &types.Delete{Objects: []types.ObjectIdentifier{
		{Key: aws.String("a"), VersionId: aws.String(a1)},
		{Key: aws.String("b")},
		{Key: aws.String("a"), VersionId: aws.String("bad")},
	}}})
	if err != nil || len(out.Deleted) != 2 || len(out.Errors) != 1 {
		t.Fatalf("delete objects: %+v %v", out, err)
	}
	byKey := map[string]types.DeletedObject{}
	for _, d := range out.Deleted {
		byKey[aws.ToString(d.Key)] = d
	}
	if d := byKey["a"]; aws.ToString(d.VersionId) != a1 || aws.ToBool(d.DeleteMarker) {
		t.Fatalf("deleted version: %+v", d)
	}
	if d := byKey["b"]; !aws.ToBool(d.DeleteMarker) || aws.ToString(d.DeleteMarkerVersionId) == "" {
		t.Fatalf("delete marker: %+v", d)
	}
	if aws.ToString(out.Errors[0].Code) != "InvalidArgument" {
		t.Fatalf("bad version id: %+v", out.Errors[0])
	}
	if got := e.versions("dmb", "a"); !slices.Equal(got, []string{"a:" + a2 + ":true"}) {
		t.Fatalf("versions of a: %v", got)
	}
	_, err = e.getV("dmb", "b", "")
	var nsk *types.NoSuchKey
	if !errors.As(err, &nsk) {
		t.Fatalf("b after delete: %v", err)
	}
	resp, _ := e.raw("PUT", "/dmb/c", []byte("x"), nil)
	if resp.StatusCode != http.StatusOK || len(resp.Header.Get("x-amz-version-id")) != 32 {
		t.Fatalf("PUT in a versioned bucket: %d %q", resp.StatusCode, resp.Header.Get("x-amz-version-id"))
	}
}

// Concurrent writers of one key in a versioned bucket: every acknowledged
// version is kept exactly once, and the key always has a latest version.
func TestVersionedConcurrentWrites(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("vconc")
	b := aws.String("vconc")
	e.enableVersioning(*b, types.BucketVersioningStatusEnabled)
	const writers, each = 8, 5
	var mu sync.Mutex
	acked := map[string]bool{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	readerErr := make(chan error, 1)
	if err := e.put(e.c, "vconc", "k", "first"); err != nil {
		t.Fatal(err)
	}
	go func() { // the key never disappears while versions pile up
		for {
			select {
			case <-stop:
				readerErr <- nil
				return
			default:
			}
			if _, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("k")}); err != nil {
				readerErr <- err
				return
			}
		}
	}()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				out, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("k"),
					Body: strings.NewReader(fmt.Sprintf("w%d-%d", w, i))})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked[aws.ToString(out.VersionId)] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-readerErr; err != nil {
		t.Fatalf("the key vanished during concurrent writes: %v", err)
	}
	out, err := e.c.ListObjectVersions(e.ctx, &s3.ListObjectVersionsInput{Bucket: b})
	if err != nil {
		t.Fatal(err)
	}
	seen, latest := map[string]bool{}, 0
	for _, v := range out.Versions {
		if seen[aws.ToString(v.VersionId)] {
			t.Fatalf("version %s listed twice", aws.ToString(v.VersionId))
		}
		seen[aws.ToString(v.VersionId)] = true
		if aws.ToBool(v.IsLatest) {
			latest++
		}
	}
	for v := range acked {
		if !seen[v] {
			t.Errorf("acknowledged version %s lost", v)
		}
	}
	if len(out.Versions) != writers*each+1 || latest != 1 {
		t.Fatalf("%d versions (want %d), %d latest", len(out.Versions), writers*each+1, latest)
	}
}

// Deleting the current version by id while others write the key never
// takes another writer's version with it.
func TestVersionDeleteRacesWrites(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("vrace")
	b := aws.String("vrace")
	e.enableVersioning(*b, types.BucketVersioningStatusEnabled)
	var mu sync.Mutex
	acked, deleted := map[string]bool{}, map[string]bool{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				out, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("k"), Body: strings.NewReader(fmt.Sprintf("%d-%d", w, i))})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked[aws.ToString(out.VersionId)] = true
				mu.Unlock()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			h, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("k")})
			if err != nil {
				continue
			}
			vid := aws.ToString(h.VersionId)
			if _, err := e.c.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String("k"), VersionId: aws.String(vid)}); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			deleted[vid] = true
			mu.Unlock()
		}
	}()
	wg.Wait()
	out, err := e.c.ListObjectVersions(e.ctx, &s3.ListObjectVersionsInput{Bucket: b})
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, v := range out.Versions {
		listed[aws.ToString(v.VersionId)] = true
	}
	for v := range acked {
		if !deleted[v] && !listed[v] {
			t.Errorf("version %s was written, never deleted, and is gone", v)
		}
		if deleted[v] && listed[v] {
			t.Errorf("version %s was deleted and is still listed", v)
		}
	}
}
