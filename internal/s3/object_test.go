package s3

import (
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

func randBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func TestPutGetSmoke(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("smoke")
	for _, n := range []int{0, 1, 1000, chunkSize, 3*chunkSize + 17} {
		data := randBytes(n)
		key := "dir/obj-" + itoa(int64(n))
		out, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("smoke"), Key: aws.String(key), Body: bytes.NewReader(data)})
		if err != nil {
			t.Fatalf("put %d: %v", n, err)
		}
		sum := md5.Sum(data)
		if got := aws.ToString(out.ETag); got != `"`+hex.EncodeToString(sum[:])+`"` {
			t.Fatalf("put %d: etag %s", n, got)
		}
		g, err := e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("smoke"), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("get %d: %v", n, err)
		}
		got, err := io.ReadAll(g.Body)
		g.Body.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("get %d: %d bytes, err %v", n, len(got), err)
		}
	}
}

func TestObjectMetadataRangesConditionals(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("objs")
	b := aws.String("objs")
	data := randBytes(3*chunkSize + 100)
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	put, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("m/obj"), Body: bytes.NewReader(data),
		ContentType: aws.String("text/plain"), ContentEncoding: aws.String("identity"), ContentDisposition: aws.String("attachment"),
		ContentLanguage: aws.String("en"), CacheControl: aws.String("max-age=60"), Expires: &exp,
		Metadata: map[string]string{"color": "blue", "Two-Words": "a b"}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("m/obj")})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(h.ContentType) != "text/plain" || aws.ToString(h.ContentEncoding) != "identity" ||
		aws.ToString(h.ContentDisposition) != "attachment" || aws.ToString(h.ContentLanguage) != "en" ||
		aws.ToString(h.CacheControl) != "max-age=60" || h.Expires == nil || !h.Expires.Equal(exp) ||
		h.Metadata["color"] != "blue" || h.Metadata["two-words"] != "a b" || aws.ToInt64(h.ContentLength) != int64(len(data)) ||
		aws.ToString(h.ETag) != aws.ToString(put.ETag) {
		t.Fatalf("head: %+v", h)
	}
	get := func(rng string, mod func(*s3.GetObjectInput)) ([]byte, *s3.GetObjectOutput, error) {
		in := &s3.GetObjectInput{Bucket: b, Key: aws.String("m/obj")}
		if rng != "" {
			in.Range = aws.String(rng)
		}
		if mod != nil {
			mod(in)
		}
		out, err := e.c.GetObject(e.ctx, in)
		if err != nil {
			return nil, nil, err
		}
		defer out.Body.Close()
		got, err := io.ReadAll(out.Body)
		return got, out, err
	}
	n := len(data)
	for rng, want := range map[string][]byte{
		"bytes=0-9": data[:10], "bytes=100-": data[100:], "bytes=-10": data[n-10:], "bytes=5-99999999": data[5:],
		"bytes=" + itoa(chunkSize-3) + "-" + itoa(2*chunkSize+2): data[chunkSize-3 : 2*chunkSize+3],
	} {
		got, out, err := get(rng, nil)
		if err != nil || !bytes.Equal(got, want) || out.ContentRange == nil {
			t.Fatalf("range %s: %d bytes, %v", rng, len(got), err)
		}
	}
	_, _, err = get("bytes="+itoa(int64(n))+"-", nil)
	e.wantCode(err, "InvalidRange")

	etag := aws.ToString(put.ETag)
	past, future := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	for _, c := range []struct {
		mod  func(*s3.GetObjectInput)
		want string
	}{
		{func(in *s3.GetObjectInput) { in.IfMatch = aws.String(etag) }, ""},
		{func(in *s3.GetObjectInput) { in.IfMatch = aws.String(`"nope"`) }, "PreconditionFailed"},
		{func(in *s3.GetObjectInput) { in.IfNoneMatch = aws.String(etag) }, "NotModified"},
		{func(in *s3.GetObjectInput) { in.IfNoneMatch = aws.String(`"other"`) }, ""},
		{func(in *s3.GetObjectInput) { in.IfModifiedSince = &future }, "NotModified"},
		{func(in *s3.GetObjectInput) { in.IfModifiedSince = &past }, ""},
		{func(in *s3.GetObjectInput) { in.IfUnmodifiedSince = &past }, "PreconditionFailed"},
		{func(in *s3.GetObjectInput) { in.IfMatch = aws.String(etag); in.IfUnmodifiedSince = &past }, ""},
	} {
		_, _, err := get("", c.mod)
		e.wantCode(err, c.want)
	}
	_, err = e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("m/obj"), IfNoneMatch: aws.String(etag)})
	e.wantCode(err, "NotModified")

	// Conditional PUT.
	_, err = e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("m/obj"), Body: strings.NewReader("new"), IfNoneMatch: aws.String("*")})
	e.wantCode(err, "PreconditionFailed")
	_, err = e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("m/fresh"), Body: strings.NewReader("new"), IfNoneMatch: aws.String("*")})
	e.wantCode(err, "")
	_, err = e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("m/fresh"), Body: strings.NewReader("x"), IfMatch: aws.String(`"nope"`)})
	e.wantCode(err, "PreconditionFailed")

	// Missing keys and buckets.
	_, err = e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String("m")})
	e.wantCode(err, "NoSuchKey") // an implicit directory is not an object
	_, err = e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String("nope")})
	e.wantCode(err, "NoSuchKey")
	_, err = e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("nobucket"), Key: aws.String("x")})
	e.wantCode(err, "NoSuchBucket")
	// A key may be an object and a prefix of other keys at once.
	_, err = e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("m/obj/under"), Body: strings.NewReader("x")})
	e.wantCode(err, "")
	_, err = e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("m/obj")})
	e.wantCode(err, "")
}

func TestTrickyKeysAndDirectoryObjects(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("keys")
	b := aws.String("keys")
	long := strings.Repeat("long-component/", 60) + "end"
	keys := []string{"with space", "plus+sign", "100%25 literal%", "ünïcødé/日本語", "a=b&c?d#e", "emoji 🐟", "tab\tand~tilde",
		"dir/", "dir/sub/", "dir/sub/file", long, strings.Repeat("n", 1024), "empty"}
	for _, k := range keys {
		body := []byte("content of " + k)
		if k == "empty" || strings.HasSuffix(k, "/") {
			body = nil
		}
		if _, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String(k), Body: bytes.NewReader(body)}); err != nil {
			t.Fatalf("put %q: %v", k, err)
		}
		out, err := e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String(k)})
		if err != nil {
			t.Fatalf("get %q: %v", k, err)
		}
		got, _ := io.ReadAll(out.Body)
		out.Body.Close()
		if !bytes.Equal(got, body) {
			t.Fatalf("get %q: %q", k, got)
		}
		if k == "empty" && aws.ToString(out.ETag) != `"d41d8cd98f00b204e9800998ecf8427e"` {
			t.Fatalf("empty object etag %s", aws.ToString(out.ETag))
		}
	}
	var listed []string
	p := s3.NewListObjectsV2Paginator(e.c, &s3.ListObjectsV2Input{Bucket: b, MaxKeys: aws.Int32(3)})
	for p.HasMorePages() {
		page, err := p.NextPage(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			listed = append(listed, aws.ToString(o.Key))
		}
	}
	want := slices.Clone(keys)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Fatalf("listed\n%q\nwant\n%q", listed, want)
	}
	// "dir/" is an object and a prefix: deleting it keeps dir/sub/file.
	if _, err := e.c.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String("dir/")}); err != nil {
		t.Fatal(err)
	}
	_, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("dir/")})
	e.wantCode(err, "NotFound")
	if _, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("dir/sub/file")}); err != nil {
		t.Fatal(err)
	}
	_, err = e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("a//b"), Body: strings.NewReader("x")})
	e.wantCode(err, "InvalidArgument")
	_, err = e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String(strings.Repeat("k", 1025)), Body: strings.NewReader("x")})
	e.wantCode(err, "KeyTooLongError")

	// DeleteObjects, quiet and not, with a missing key (not an error).
	del, err := e.c.DeleteObjects(e.ctx, &s3.DeleteObjectsInput{Bucket: b, Delete: &types.Delete{Objects: []types.ObjectIdentifier{
		{Key: aws.String("with space")}, {Key: aws.String("plus+sign")}, {Key: aws.String("never-there")}}}})
	if err != nil || len(del.Deleted) != 3 || len(del.Errors) != 0 {
		t.Fatalf("delete objects: %+v %v", del, err)
	}
	_, err = e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("plus+sign")})
	e.wantCode(err, "NotFound")
}

func TestCopyObject(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("src")
	e.mkBucket("dst")
	data := randBytes(2*chunkSize + 5)
	put, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("src"), Key: aws.String("o"), Body: bytes.NewReader(data),
		ContentType: aws.String("image/png"), Metadata: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: aws.String("dst"), Key: aws.String("copy"), CopySource: aws.String("src/o")})
	if err != nil || aws.ToString(cp.CopyObjectResult.ETag) != aws.ToString(put.ETag) {
		t.Fatalf("copy: %v %v", cp, err)
	}
	g, err := e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("dst"), Key: aws.String("copy")})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(g.Body)
	g.Body.Close()
	if !bytes.Equal(got, data) || aws.ToString(g.ContentType) != "image/png" || g.Metadata["k"] != "v" {
		t.Fatalf("copied object: %d bytes %v %v", len(got), g.ContentType, g.Metadata)
	}
	// REPLACE.
	_, err = e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: aws.String("dst"), Key: aws.String("copy2"), CopySource: aws.String("src/o"),
		MetadataDirective: types.MetadataDirectiveReplace, ContentType: aws.String("text/x"), Metadata: map[string]string{"n": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: aws.String("dst"), Key: aws.String("copy2")})
	if aws.ToString(h.ContentType) != "text/x" || h.Metadata["n"] != "1" || h.Metadata["k"] != "" {
		t.Fatalf("replaced metadata: %v %v", h.ContentType, h.Metadata)
	}
	// Onto itself: only with REPLACE.
	_, err = e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: aws.String("src"), Key: aws.String("o"), CopySource: aws.String("src/o")})
	e.wantCode(err, "InvalidRequest")
	_, err = e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: aws.String("src"), Key: aws.String("o"), CopySource: aws.String("src/o"),
		MetadataDirective: types.MetadataDirectiveReplace, Metadata: map[string]string{"self": "yes"}})
	if err != nil {
		t.Fatal(err)
	}
	h, _ = e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: aws.String("src"), Key: aws.String("o")})
	if h.Metadata["self"] != "yes" || aws.ToInt64(h.ContentLength) != int64(len(data)) {
		t.Fatalf("self copy: %v", h.Metadata)
	}
	// Copy-source conditionals and missing sources.
	_, err = e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: aws.String("dst"), Key: aws.String("c3"), CopySource: aws.String("src/o"), CopySourceIfMatch: aws.String(`"x"`)})
	e.wantCode(err, "PreconditionFailed")
	_, err = e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: aws.String("dst"), Key: aws.String("c3"), CopySource: aws.String("src/o"), CopySourceIfNoneMatch: put.ETag})
	e.wantCode(err, "PreconditionFailed")
	_, err = e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: aws.String("dst"), Key: aws.String("c3"), CopySource: aws.String("src/missing")})
	e.wantCode(err, "NoSuchKey")
	_, err = e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: aws.String("dst"), Key: aws.String("c3"), CopySource: aws.String("src/o"), CopySourceIfMatch: put.ETag})
	e.wantCode(err, "")
}

func TestChecksums(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("sums")
	b := aws.String("sums")
	data := randBytes(chunkSize + 3)
	for _, alg := range []types.ChecksumAlgorithm{types.ChecksumAlgorithmCrc32, types.ChecksumAlgorithmCrc32c,
		types.ChecksumAlgorithmSha1, types.ChecksumAlgorithmSha256, types.ChecksumAlgorithmCrc64nvme} {
		key := aws.String("o-" + string(alg))
		if _, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: key, Body: bytes.NewReader(data), ChecksumAlgorithm: alg}); err != nil {
			t.Fatalf("%s: put: %v", alg, err)
		}
		// The SDK validates the returned checksum against the body.
		g, err := e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: b, Key: key, ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(g.Body)
		g.Body.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: get: %v", alg, err)
		}
		v := aws.ToString(g.ChecksumCRC32) + aws.ToString(g.ChecksumCRC32C) + aws.ToString(g.ChecksumSHA1) +
			aws.ToString(g.ChecksumSHA256) + aws.ToString(g.ChecksumCRC64NVME)
		if v == "" {
			t.Fatalf("%s: no checksum returned", alg)
		}
		// A ranged read returns no whole-object checksum.
		g, err = e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: b, Key: key, ChecksumMode: types.ChecksumModeEnabled, Range: aws.String("bytes=0-9")})
		if err != nil {
			t.Fatal(err)
		}
		g.Body.Close()
	}
	// A wrong checksum or MD5 in a header is BadDigest and stores nothing.
	bad := []struct {
		hdr  map[string]string
		want string
	}{
		{map[string]string{"x-amz-checksum-crc32": "AAAAAA=="}, "BadDigest"},
		{map[string]string{"x-amz-checksum-sha256": "n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg="}, "BadDigest"},
		{map[string]string{"Content-MD5": "1B2M2Y8AsgTpgAmY7PhCfg=="}, "BadDigest"},
		{map[string]string{"Content-MD5": "not base64"}, "InvalidDigest"},
	}
	for _, c := range bad {
		resp, body := e.raw("PUT", "/sums/bad", []byte("payload"), c.hdr)
		if resp.StatusCode != 400 || !strings.Contains(string(body), "<Code>"+c.want+"</Code>") {
			t.Fatalf("%v: %d %s", c.hdr, resp.StatusCode, body)
		}
	}
	_, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("bad")})
	e.wantCode(err, "NotFound")
	// A right checksum header is stored.
	sum := sha256.Sum256([]byte("payload"))
	resp, body := e.raw("PUT", "/sums/good", []byte("payload"), map[string]string{"x-amz-checksum-sha256": base64.StdEncoding.EncodeToString(sum[:])})
	if resp.StatusCode != 200 {
		t.Fatalf("good checksum: %d %s", resp.StatusCode, body)
	}
	h, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("good"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil || aws.ToString(h.ChecksumSHA256) != base64.StdEncoding.EncodeToString(sum[:]) {
		t.Fatalf("stored checksum %v %v", h.ChecksumSHA256, err)
	}
}

// PUT with If-Match is a compare-and-swap: of writers that all read the
// same ETag, exactly one wins.
func TestConditionalPutIsAtomic(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("cas")
	for _, versioned := range []bool{false, true} {
		key := fmt.Sprintf("counter-%v", versioned)
		if versioned {
			e.enableVersioning("cas", types.BucketVersioningStatusEnabled)
		}
		first, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("cas"), Key: aws.String(key), Body: strings.NewReader("0")})
		if err != nil {
			t.Fatal(err)
		}
		var wins, refused atomic.Int32
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("cas"), Key: aws.String(key),
					Body: strings.NewReader(fmt.Sprint(i + 1)), IfMatch: first.ETag})
				switch code(err) {
				case "":
					wins.Add(1)
				case "PreconditionFailed":
					refused.Add(1)
				default:
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 || refused.Load() != 7 {
			t.Fatalf("versioned %v: %d writers won, %d refused", versioned, wins.Load(), refused.Load())
		}
	}
}

// Tagging an object while it is overwritten never brings back the old
// content (whose chunks the overwrite has already queued for deletion).
func TestTaggingRacesOverwrite(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("tagrace")
	b, k := aws.String("tagrace"), aws.String("obj")
	if err := e.put(e.c, "tagrace", "obj", "round -1"); err != nil {
		t.Fatal(err)
	}
	for round := range 30 {
		want := fmt.Sprintf("round %d", round)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := e.put(e.c, "tagrace", "obj", want); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			_, err := e.c.PutObjectTagging(e.ctx, &s3.PutObjectTaggingInput{Bucket: b, Key: k,
				Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("round"), Value: aws.String(fmt.Sprint(round))}}}})
			if err != nil {
				t.Error(err)
			}
		}()
		wg.Wait()
		g, err := e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: b, Key: k})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(g.Body)
		g.Body.Close()
		if err != nil || string(got) != want {
			t.Fatalf("round %d: content %q (%v), want %q", round, got, err, want)
		}
	}
}

// Encryption headers are honoured or refused, never silently skipped
// (sse_test.go has the rest).
func TestServerSideEncryptionHeaders(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("sse")
	for hdr, want := range map[string]int{
		"x-amz-server-side-encryption: AES256":                    200,
		"x-amz-server-side-encryption: aws:kms":                   200,
		"x-amz-server-side-encryption: rot13":                     400,
		"x-amz-server-side-encryption-customer-algorithm: AES256": 400, // no key
	} {
		k, v, _ := strings.Cut(hdr, ": ")
		resp, body := e.raw("PUT", "/sse/obj", []byte("x"), map[string]string{k: v})
		if resp.StatusCode != want {
			t.Errorf("%s: %d %s", hdr, resp.StatusCode, body)
		}
	}
}
