package s3

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash/crc64"
	"io"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/filer"
)

func TestMultipartUpload(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("mp1")
	b, k := aws.String("mp1"), aws.String("big/object")
	cr, err := e.c.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: k, ContentType: aws.String("video/x"),
		Metadata: map[string]string{"m": "1"}, ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c})
	if err != nil {
		t.Fatal(err)
	}
	id := cr.UploadId
	sizes := []int{150 << 10, 200<<10 + 7, 10 << 10}
	var parts [][]byte
	var done []types.CompletedPart
	md5s := md5.New()
	for i, n := range sizes {
		data := randBytes(n)
		parts = append(parts, data)
		up, err := e.c.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: b, Key: k, UploadId: id, PartNumber: aws.Int32(int32(i + 1)),
			Body: bytes.NewReader(data), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c})
		if err != nil {
			t.Fatalf("part %d: %v", i+1, err)
		}
		sum := md5.Sum(data)
		if aws.ToString(up.ETag) != `"`+hex.EncodeToString(sum[:])+`"` {
			t.Fatalf("part %d etag %s", i+1, aws.ToString(up.ETag))
		}
		md5s.Write(sum[:])
		done = append(done, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: up.ETag, ChecksumCRC32C: up.ChecksumCRC32C})
	}
	lp, err := e.c.ListParts(e.ctx, &s3.ListPartsInput{Bucket: b, Key: k, UploadId: id, MaxParts: aws.Int32(2)})
	if err != nil || len(lp.Parts) != 2 || !aws.ToBool(lp.IsTruncated) || aws.ToInt64(lp.Parts[1].Size) != int64(sizes[1]) {
		t.Fatalf("list parts: %+v %v", lp, err)
	}
	lu, err := e.c.ListMultipartUploads(e.ctx, &s3.ListMultipartUploadsInput{Bucket: b})
	if err != nil || len(lu.Uploads) != 1 || aws.ToString(lu.Uploads[0].UploadId) != aws.ToString(id) || aws.ToString(lu.Uploads[0].Key) != *k {
		t.Fatalf("list uploads: %+v %v", lu, err)
	}

	// Validation: order, unknown part, small non-last part.
	_, err = e.c.CompleteMultipartUpload(e.ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: k, UploadId: id,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{done[1], done[0]}}})
	e.wantCode(err, "InvalidPartOrder")
	_, err = e.c.CompleteMultipartUpload(e.ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: k, UploadId: id,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: aws.String(`"0123"`)}}}})
	e.wantCode(err, "InvalidPart")
	_, err = e.c.CompleteMultipartUpload(e.ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: k, UploadId: id,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{done[0], {PartNumber: aws.Int32(4), ETag: done[0].ETag}}}})
	e.wantCode(err, "InvalidPart")
	_, err = e.c.CompleteMultipartUpload(e.ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: k, UploadId: id,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{done[2], done[1]}}})
	e.wantCode(err, "InvalidPartOrder")
	_, err = e.c.CompleteMultipartUpload(e.ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: k, UploadId: id,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{done[0], done[2], {PartNumber: aws.Int32(5), ETag: done[1].ETag}}}})
	e.wantCode(err, "EntityTooSmall")
	small, err := e.c.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: b, Key: aws.String("other"), UploadId: id, PartNumber: aws.Int32(1), Body: bytes.NewReader([]byte("x"))})
	e.wantCode(err, "NoSuchUpload") // the upload belongs to another key
	_ = small

	// The chunks of the parts, to check completion reuses them.
	var partFIDs []string
	ups, _, _ := e.fs.Filer().ListEntries(e.ctx, "/buckets/.uploads/mp1/"+aws.ToString(id), filer.ListOptions{})
	for _, pe := range ups {
		cs, _, _ := chunk.ReadList(pe.Xattrs["s3.chunks"])
		for _, c := range cs {
			partFIDs = append(partFIDs, c.FID)
		}
	}
	comp, err := e.c.CompleteMultipartUpload(e.ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: k, UploadId: id,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
	if err != nil {
		t.Fatal(err)
	}
	wantETag := fmt.Sprintf(`"%s-3"`, hex.EncodeToString(md5s.Sum(nil)))
	if aws.ToString(comp.ETag) != wantETag {
		t.Fatalf("etag %s, want %s", aws.ToString(comp.ETag), wantETag)
	}
	ent, err := e.fs.Filer().FindEntry(e.ctx, "/buckets/mp1/big/object")
	if err != nil {
		t.Fatal(err)
	}
	var objFIDs []string
	for _, c := range ent.Chunks {
		objFIDs = append(objFIDs, c.FID)
	}
	slices.Sort(objFIDs)
	slices.Sort(partFIDs)
	if len(partFIDs) == 0 || !slices.Equal(objFIDs, partFIDs) {
		t.Fatalf("object chunks %v, part chunks %v: completion copied data", objFIDs, partFIDs)
	}
	g, err := e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: b, Key: k, ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(g.Body)
	g.Body.Close()
	if !bytes.Equal(got, bytes.Join(parts, nil)) || aws.ToString(g.ETag) != wantETag || aws.ToString(g.ContentType) != "video/x" || g.Metadata["m"] != "1" {
		t.Fatalf("object: %d bytes etag %s type %s meta %v", len(got), aws.ToString(g.ETag), aws.ToString(g.ContentType), g.Metadata)
	}
	if aws.ToString(g.ChecksumCRC32C) == "" {
		t.Fatalf("no composite checksum returned")
	}
	// GET by part number.
	g, err = e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: b, Key: k, PartNumber: aws.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	got, _ = io.ReadAll(g.Body)
	g.Body.Close()
	if !bytes.Equal(got, parts[1]) || aws.ToInt32(g.PartsCount) != 3 {
		t.Fatalf("part 2: %d bytes, parts count %d", len(got), aws.ToInt32(g.PartsCount))
	}
	// A part the object does not have is 400 InvalidPart (Ceph's s3-tests
	// test_multipart_get_part expects so).
	_, err = e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: b, Key: k, PartNumber: aws.Int32(4)})
	e.wantCode(err, "InvalidPart")
	// The upload is gone.
	_, err = e.c.ListParts(e.ctx, &s3.ListPartsInput{Bucket: b, Key: k, UploadId: id})
	e.wantCode(err, "NoSuchUpload")
}

func TestMultipartTooSmallCopyAndAbort(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("mp2")
	b := aws.String("mp2")
	src := randBytes(300 << 10)
	if _, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("src"), Body: bytes.NewReader(src)}); err != nil {
		t.Fatal(err)
	}
	cr, _ := e.c.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("dst")})
	p1, err := e.c.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: b, Key: aws.String("dst"), UploadId: cr.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader([]byte("tiny"))})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := e.c.UploadPartCopy(e.ctx, &s3.UploadPartCopyInput{Bucket: b, Key: aws.String("dst"), UploadId: cr.UploadId, PartNumber: aws.Int32(2),
		CopySource: aws.String("mp2/src"), CopySourceRange: aws.String("bytes=1000-200999")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.c.CompleteMultipartUpload(e.ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: aws.String("dst"), UploadId: cr.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: p1.ETag}, {PartNumber: aws.Int32(2), ETag: p2.CopyPartResult.ETag}}}})
	e.wantCode(err, "EntityTooSmall")
	// Replace part 1 by a copy of a large range; then completion works.
	p1c, err := e.c.UploadPartCopy(e.ctx, &s3.UploadPartCopyInput{Bucket: b, Key: aws.String("dst"), UploadId: cr.UploadId, PartNumber: aws.Int32(1),
		CopySource: aws.String("mp2/src")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.c.CompleteMultipartUpload(e.ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: aws.String("dst"), UploadId: cr.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: p1c.CopyPartResult.ETag}, {PartNumber: aws.Int32(2), ETag: p2.CopyPartResult.ETag}}}})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String("dst")})
	got, _ := io.ReadAll(g.Body)
	g.Body.Close()
	if want := append(slices.Clone(src), src[1000:201000]...); !bytes.Equal(got, want) {
		t.Fatalf("assembled copy: %d bytes, want %d", len(got), len(want))
	}
	_, err = e.c.UploadPartCopy(e.ctx, &s3.UploadPartCopyInput{Bucket: b, Key: aws.String("dst"), UploadId: cr.UploadId, PartNumber: aws.Int32(1),
		CopySource: aws.String("mp2/src")})
	e.wantCode(err, "NoSuchUpload")

	// Abort.
	cr2, _ := e.c.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("aborted")})
	if _, err := e.c.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: b, Key: aws.String("aborted"), UploadId: cr2.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(randBytes(1000))}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.AbortMultipartUpload(e.ctx, &s3.AbortMultipartUploadInput{Bucket: b, Key: aws.String("aborted"), UploadId: cr2.UploadId}); err != nil {
		t.Fatal(err)
	}
	_, err = e.c.ListParts(e.ctx, &s3.ListPartsInput{Bucket: b, Key: aws.String("aborted"), UploadId: cr2.UploadId})
	e.wantCode(err, "NoSuchUpload")
	_, err = e.c.AbortMultipartUpload(e.ctx, &s3.AbortMultipartUploadInput{Bucket: b, Key: aws.String("aborted"), UploadId: aws.String("nonexistent")})
	e.wantCode(err, "NoSuchUpload")
	_, err = e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("aborted")})
	e.wantCode(err, "NotFound")
}

// A FULL_OBJECT checksum (CRC64NVME's only type) is the CRC of the whole
// object: Kelp combines the parts' CRCs, checks the client's value against it
// and returns it.
func TestMultipartFullObjectChecksum(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("mpfull")
	b := aws.String("mpfull")
	sizes := []int{150 << 10, 100<<10 + 3}
	var whole []byte
	upload := func(k string) (*string, []types.CompletedPart) {
		t.Helper()
		cr, err := e.c.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String(k),
			ChecksumAlgorithm: types.ChecksumAlgorithmCrc64nvme})
		if err != nil || cr.ChecksumType != types.ChecksumTypeFullObject {
			t.Fatalf("create: %v, type %q", err, cr.ChecksumType)
		}
		whole = whole[:0]
		var done []types.CompletedPart
		for i, n := range sizes {
			data := randBytes(n)
			whole = append(whole, data...)
			up, err := e.c.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: b, Key: aws.String(k), UploadId: cr.UploadId,
				PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(data), ChecksumAlgorithm: types.ChecksumAlgorithmCrc64nvme})
			if err != nil {
				t.Fatal(err)
			}
			done = append(done, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: up.ETag, ChecksumCRC64NVME: up.ChecksumCRC64NVME})
		}
		return cr.UploadId, done
	}
	wholeCRC := func() string {
		h := crc64.New(crc64.MakeTable(bits.Reverse64(0xAD93D23594C93659)))
		h.Write(whole)
		return base64.StdEncoding.EncodeToString(h.Sum(nil))
	}

	id, done := upload("right")
	want := wholeCRC()
	c, err := e.c.CompleteMultipartUpload(e.ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: aws.String("right"), UploadId: id,
		ChecksumCRC64NVME: aws.String(want), ChecksumType: types.ChecksumTypeFullObject,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
	if err != nil || aws.ToString(c.ChecksumCRC64NVME) != want {
		t.Fatalf("complete: %v, checksum %q want %q", err, aws.ToString(c.ChecksumCRC64NVME), want)
	}
	h, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("right"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil || aws.ToString(h.ChecksumCRC64NVME) != want || h.ChecksumType != types.ChecksumTypeFullObject {
		t.Fatalf("head: %v, checksum %q type %q", err, aws.ToString(h.ChecksumCRC64NVME), h.ChecksumType)
	}

	// Without the client's value, the combined one is stored all the same.
	id, done = upload("computed")
	want = wholeCRC()
	if _, err := e.c.CompleteMultipartUpload(e.ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: aws.String("computed"), UploadId: id,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done}}); err != nil {
		t.Fatal(err)
	}
	h, err = e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("computed"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil || aws.ToString(h.ChecksumCRC64NVME) != want {
		t.Fatalf("computed: %v, checksum %q want %q", err, aws.ToString(h.ChecksumCRC64NVME), want)
	}

	// A wrong whole-object value is refused and the upload stays.
	id, done = upload("wrong")
	_, err = e.c.CompleteMultipartUpload(e.ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: aws.String("wrong"), UploadId: id,
		ChecksumCRC64NVME: aws.String("AAAAAAAAAAA="), MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
	e.wantCode(err, "BadDigest")
	if _, err := e.c.ListParts(e.ctx, &s3.ListPartsInput{Bucket: b, Key: aws.String("wrong"), UploadId: id}); err != nil {
		t.Fatalf("upload gone after a refused completion: %v", err)
	}

	// Digests cannot be combined; CRC64NVME has no composite form.
	_, err = e.c.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("x"),
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256, ChecksumType: types.ChecksumTypeFullObject})
	e.wantCode(err, "InvalidRequest")
	_, err = e.c.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("x"),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc64nvme, ChecksumType: types.ChecksumTypeComposite})
	e.wantCode(err, "InvalidRequest")
}

// Completing one upload several times at once (a client retrying) commits
// it once; every completion answers its result, as S3 answers a repeated
// completion, and no two versions share chunks.
func TestMultipartCompleteOnce(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("mponce")
	b, k := aws.String("mponce"), aws.String("obj")
	e.enableVersioning(*b, types.BucketVersioningStatusEnabled)
	cr, err := e.c.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: k})
	if err != nil {
		t.Fatal(err)
	}
	up, err := e.c.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: b, Key: k, UploadId: cr.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(randBytes(1000))})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	results := map[string]int{} // "etag version" -> completions
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := e.c.CompleteMultipartUpload(e.ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: k, UploadId: cr.UploadId,
				MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: up.ETag}}}})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			results[aws.ToString(out.ETag)+" "+aws.ToString(out.VersionId)]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	out, err := e.c.ListObjectVersions(e.ctx, &s3.ListObjectVersionsInput{Bucket: b})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || len(out.Versions) != 1 {
		t.Fatalf("completions answered %v; %d versions", results, len(out.Versions))
	}
	for r := range results {
		if want := aws.ToString(out.Versions[0].ETag) + " " + aws.ToString(out.Versions[0].VersionId); r != want {
			t.Fatalf("completions answered %q, the version is %q", r, want)
		}
	}
}

func TestGetObjectAttributes(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("attrs")
	b, k := aws.String("attrs"), aws.String("mp")
	cr, err := e.c.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: k, ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c})
	if err != nil {
		t.Fatal(err)
	}
	sizes := []int{110 << 10, 120 << 10, 5}
	var done []types.CompletedPart
	for i, n := range sizes {
		up, err := e.c.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: b, Key: k, UploadId: cr.UploadId, PartNumber: aws.Int32(int32(i + 1)),
			Body: bytes.NewReader(randBytes(n)), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c})
		if err != nil {
			t.Fatal(err)
		}
		done = append(done, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: up.ETag, ChecksumCRC32C: up.ChecksumCRC32C})
	}
	c, err := e.c.CompleteMultipartUpload(e.ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: k, UploadId: cr.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.c.GetObjectAttributes(e.ctx, &s3.GetObjectAttributesInput{Bucket: b, Key: k, MaxParts: aws.Int32(2),
		ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesEtag, types.ObjectAttributesChecksum,
			types.ObjectAttributesObjectParts, types.ObjectAttributesObjectSize, types.ObjectAttributesStorageClass}})
	if err != nil {
		t.Fatal(err)
	}
	total := int64(sizes[0] + sizes[1] + sizes[2])
	if strings.Trim(aws.ToString(out.ETag), `"`) != strings.Trim(aws.ToString(c.ETag), `"`) || aws.ToInt64(out.ObjectSize) != total ||
		out.StorageClass != types.StorageClassStandard || out.Checksum == nil || aws.ToString(out.Checksum.ChecksumCRC32C) == "" ||
		out.ObjectParts == nil || aws.ToInt32(out.ObjectParts.TotalPartsCount) != 3 || len(out.ObjectParts.Parts) != 2 ||
		!aws.ToBool(out.ObjectParts.IsTruncated) || aws.ToInt64(out.ObjectParts.Parts[1].Size) != int64(sizes[1]) {
		t.Fatalf("attributes: %+v", out)
	}
	out, err = e.c.GetObjectAttributes(e.ctx, &s3.GetObjectAttributesInput{Bucket: b, Key: k, PartNumberMarker: out.ObjectParts.NextPartNumberMarker,
		ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesObjectParts}})
	if err != nil || len(out.ObjectParts.Parts) != 1 || aws.ToInt32(out.ObjectParts.Parts[0].PartNumber) != 3 || out.ETag != nil {
		t.Fatalf("second page: %+v %v", out, err)
	}
	resp, body := e.raw("GET", "/attrs/mp?attributes", nil, map[string]string{"x-amz-object-attributes": "Colour"})
	if resp.StatusCode != 400 || !strings.Contains(string(body), "InvalidArgument") {
		t.Fatalf("unknown attribute: %d %s", resp.StatusCode, body)
	}
	_, err = e.c.GetObjectAttributes(e.ctx, &s3.GetObjectAttributesInput{Bucket: b, Key: aws.String("missing"),
		ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesEtag}})
	e.wantCode(err, "NoSuchKey")
}
