package s3

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/kelpfs/kelp/internal/objectapi"
	"github.com/kelpfs/kelp/internal/sse"
)

// ssec is a customer key as the SDK takes it.
type ssec struct{ key, md5 string }

func newSSEC() ssec {
	k := sse.NewKey()
	sum := md5.Sum(k)
	return ssec{base64.StdEncoding.EncodeToString(k), base64.StdEncoding.EncodeToString(sum[:])}
}

// plaintext is recognisable content spanning several segments.
func plaintext(n int) []byte {
	return bytes.Repeat([]byte("kelp-plaintext-"), n/15+1)[:n]
}

func md5hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

// stored reads an object's stored bytes through the filer's HTTP API,
// which knows nothing of encryption.
func (e *env) stored(bucket, key string) []byte {
	e.t.Helper()
	resp, err := http.Get("http://" + e.fs.Addr() + "/buckets/" + bucket + "/" + key)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		e.t.Fatalf("filer GET %s/%s: %d %s", bucket, key, resp.StatusCode, b)
	}
	return b
}

// storedSSE returns the encryption recorded for an object.
func (e *env) storedSSE(bucket, key string) *sse.Meta {
	e.t.Helper()
	anyKey := func(*sse.Meta) ([]byte, error) { return sse.NewKey(), nil } // not used: no body is read
	o, err := e.gw.Layer().GetObject(e.ctx, bucket, key, objectapi.GetOptions{NoBody: true, Keys: objectapi.Keys{Object: anyKey}})
	if err != nil || o.Info.SSE == nil {
		e.t.Fatalf("%s/%s: %v, encryption %v", bucket, key, err, o)
	}
	return o.Info.SSE
}

func (e *env) getBody(in *s3.GetObjectInput) ([]byte, *s3.GetObjectOutput) {
	e.t.Helper()
	out, err := e.c.GetObject(e.ctx, in)
	if err != nil {
		e.t.Fatalf("GetObject %s: %v", aws.ToString(in.Key), err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return b, out
}

func TestSSECustomerKeys(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("ssec")
	b, k := aws.String("ssec"), aws.String("obj")
	ck := newSSEC()
	data := plaintext(3*sse.SegmentSize + 100)
	put, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: k, Body: bytes.NewReader(data),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(ck.key), SSECustomerKeyMD5: aws.String(ck.md5)})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(put.SSECustomerAlgorithm) != "AES256" || aws.ToString(put.SSECustomerKeyMD5) != ck.md5 {
		t.Fatalf("PUT echoes algorithm %q key MD5 %q", aws.ToString(put.SSECustomerAlgorithm), aws.ToString(put.SSECustomerKeyMD5))
	}
	if strings.Trim(aws.ToString(put.ETag), `"`) == md5hex(data) {
		t.Fatal("the ETag of an SSE-C object is the MD5 of its plaintext")
	}
	raw := e.stored("ssec", "obj")
	if int64(len(raw)) != sse.CipherSize(int64(len(data)), sse.SegmentSize) || bytes.Contains(raw, []byte("kelp-plaintext-")) {
		t.Fatalf("stored %d bytes, holding plaintext: %v", len(raw), bytes.Contains(raw, []byte("kelp-plaintext-")))
	}
	withKey := func(in *s3.GetObjectInput) *s3.GetObjectInput {
		in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String("AES256"), aws.String(ck.key), aws.String(ck.md5)
		return in
	}
	got, out := e.getBody(withKey(&s3.GetObjectInput{Bucket: b, Key: k}))
	if !bytes.Equal(got, data) || aws.ToInt64(out.ContentLength) != int64(len(data)) || aws.ToString(out.SSECustomerKeyMD5) != ck.md5 {
		t.Fatalf("GET: %d bytes (want %d), length %d", len(got), len(data), aws.ToInt64(out.ContentLength))
	}
	// A range across a segment boundary.
	lo, hi := sse.SegmentSize-10, 2*sse.SegmentSize+5
	got, _ = e.getBody(withKey(&s3.GetObjectInput{Bucket: b, Key: k, Range: aws.String(fmt.Sprintf("bytes=%d-%d", lo, hi))}))
	if !bytes.Equal(got, data[lo:hi+1]) {
		t.Fatalf("range read differs")
	}
	// Without the key, with another key, with a wrong MD5.
	_, err = e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: b, Key: k})
	e.wantCode(err, "InvalidRequest")
	other := newSSEC()
	_, err = e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: b, Key: k, SSECustomerAlgorithm: aws.String("AES256"),
		SSECustomerKey: aws.String(other.key), SSECustomerKeyMD5: aws.String(other.md5)})
	e.wantCode(err, "AccessDenied")
	_, err = e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: b, Key: k, SSECustomerAlgorithm: aws.String("AES256"),
		SSECustomerKey: aws.String(ck.key), SSECustomerKeyMD5: aws.String(other.md5)})
	e.wantCode(err, "InvalidArgument")
	resp, _ := e.raw("HEAD", "/ssec/obj", nil, nil)
	if resp.StatusCode != 400 {
		t.Fatalf("HEAD without the key: %d, want 400", resp.StatusCode)
	}
	head, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: k, SSECustomerAlgorithm: aws.String("AES256"),
		SSECustomerKey: aws.String(ck.key), SSECustomerKeyMD5: aws.String(ck.md5)})
	if err != nil || aws.ToInt64(head.ContentLength) != int64(len(data)) {
		t.Fatalf("HEAD with the key: %v", err)
	}
	// SSE-C headers for an object that is not SSE-C.
	if _, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("plain"), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	_, err = e.c.GetObject(e.ctx, withKey(&s3.GetObjectInput{Bucket: b, Key: aws.String("plain")}))
	e.wantCode(err, "InvalidRequest")
	// Attributes need the key too, and report the plaintext size.
	_, err = e.c.GetObjectAttributes(e.ctx, &s3.GetObjectAttributesInput{Bucket: b, Key: k, ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesObjectSize}})
	e.wantCode(err, "InvalidRequest")
	attrs, err := e.c.GetObjectAttributes(e.ctx, &s3.GetObjectAttributesInput{Bucket: b, Key: k,
		ObjectAttributes:     []types.ObjectAttributes{types.ObjectAttributesObjectSize},
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(ck.key), SSECustomerKeyMD5: aws.String(ck.md5)})
	if err != nil || aws.ToInt64(attrs.ObjectSize) != int64(len(data)) {
		t.Fatalf("attributes: %v", err)
	}
	// Listings report the plaintext size.
	list, err := e.c.ListObjectsV2(e.ctx, &s3.ListObjectsV2Input{Bucket: b, Prefix: k})
	if err != nil || len(list.Contents) != 1 || aws.ToInt64(list.Contents[0].Size) != int64(len(data)) {
		t.Fatalf("list: %v", err)
	}
}

func TestSSES3(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("sses3")
	b := aws.String("sses3")
	data := plaintext(200 << 10)
	put, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("o"), Body: bytes.NewReader(data),
		ServerSideEncryption: types.ServerSideEncryptionAes256, ChecksumAlgorithm: types.ChecksumAlgorithmCrc32})
	if err != nil {
		t.Fatal(err)
	}
	if put.ServerSideEncryption != types.ServerSideEncryptionAes256 {
		t.Fatalf("PUT answers ServerSideEncryption %q", put.ServerSideEncryption)
	}
	if strings.Trim(aws.ToString(put.ETag), `"`) != md5hex(data) {
		t.Fatal("the ETag of an SSE-S3 object is not the MD5 of its plaintext")
	}
	if bytes.Contains(e.stored("sses3", "o"), []byte("kelp-plaintext-")) {
		t.Fatal("plaintext stored")
	}
	got, out := e.getBody(&s3.GetObjectInput{Bucket: b, Key: aws.String("o"), ChecksumMode: types.ChecksumModeEnabled})
	if !bytes.Equal(got, data) || out.ServerSideEncryption != types.ServerSideEncryptionAes256 {
		t.Fatalf("GET: equal %v, SSE %q", bytes.Equal(got, data), out.ServerSideEncryption)
	}
	if aws.ToString(out.ChecksumCRC32) != aws.ToString(put.ChecksumCRC32) || aws.ToString(put.ChecksumCRC32) == "" {
		t.Fatalf("checksum of the plaintext: GET %q PUT %q", aws.ToString(out.ChecksumCRC32), aws.ToString(put.ChecksumCRC32))
	}
	head, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("o")})
	if err != nil || head.ServerSideEncryption != types.ServerSideEncryptionAes256 || aws.ToInt64(head.ContentLength) != int64(len(data)) {
		t.Fatalf("HEAD: %v", err)
	}
	// A wrong Content-MD5 is still refused.
	wrong := md5.Sum([]byte("other"))
	_, err = e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("bad"), Body: bytes.NewReader(data),
		ServerSideEncryption: types.ServerSideEncryptionAes256, ContentMD5: aws.String(base64.StdEncoding.EncodeToString(wrong[:]))})
	e.wantCode(err, "BadDigest")
	cp, err := e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String("copy"), CopySource: aws.String("sses3/o"),
		ServerSideEncryption: types.ServerSideEncryptionAes256})
	if err != nil || cp.ServerSideEncryption != types.ServerSideEncryptionAes256 {
		t.Fatalf("copy: %v", err)
	}
	// A copy without SSE headers is not encrypted (the bucket has no default).
	cp, err = e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String("clear"), CopySource: aws.String("sses3/o")})
	if err != nil || cp.ServerSideEncryption != "" {
		t.Fatalf("plain copy: %v %q", err, cp.ServerSideEncryption)
	}
	if got, _ := e.getBody(&s3.GetObjectInput{Bucket: b, Key: aws.String("clear")}); !bytes.Equal(got, data) {
		t.Fatal("decrypted copy differs")
	}
}

func TestSSEKMS(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("kms")
	b := aws.String("kms")
	data := plaintext(100 << 10)
	put, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("default"), Body: bytes.NewReader(data),
		ServerSideEncryption: types.ServerSideEncryptionAwsKms})
	if err != nil {
		t.Fatal(err)
	}
	def, err := e.gw.cfg.KMS.Describe("alias/aws/s3")
	if err != nil || put.ServerSideEncryption != types.ServerSideEncryptionAwsKms || aws.ToString(put.SSEKMSKeyId) != def.ID {
		t.Fatalf("PUT with the default key: %q key %q (default %s, %v)", put.ServerSideEncryption, aws.ToString(put.SSEKMSKeyId), def.ID, err)
	}
	if strings.Trim(aws.ToString(put.ETag), `"`) == md5hex(data) {
		t.Fatal("the ETag of an SSE-KMS object is the MD5 of its plaintext")
	}
	got, out := e.getBody(&s3.GetObjectInput{Bucket: b, Key: aws.String("default")})
	if !bytes.Equal(got, data) || out.ServerSideEncryption != types.ServerSideEncryptionAwsKms || aws.ToString(out.SSEKMSKeyId) != def.ID {
		t.Fatalf("GET: %q %q", out.ServerSideEncryption, aws.ToString(out.SSEKMSKeyId))
	}
	// A named key with an encryption context and a bucket key.
	key, err := e.gw.cfg.KMS.Create("app", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := base64.StdEncoding.EncodeToString([]byte(`{"team":"a","app":"b"}`))
	put, err = e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("named"), Body: bytes.NewReader(data),
		ServerSideEncryption: types.ServerSideEncryptionAwsKms, SSEKMSKeyId: aws.String("alias/app"),
		SSEKMSEncryptionContext: aws.String(ctx), BucketKeyEnabled: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(put.SSEKMSKeyId) != key.ID || !aws.ToBool(put.BucketKeyEnabled) || put.SSEKMSEncryptionContext == nil {
		t.Fatalf("PUT echoes key %q bucket key %v context %v", aws.ToString(put.SSEKMSKeyId), aws.ToBool(put.BucketKeyEnabled), put.SSEKMSEncryptionContext)
	}
	if got, out := e.getBody(&s3.GetObjectInput{Bucket: b, Key: aws.String("named")}); !bytes.Equal(got, data) || !aws.ToBool(out.BucketKeyEnabled) {
		t.Fatal("GET of a bucket-key object")
	}
	// A second object under the same key and bucket key shares the bucket
	// key (the key service is not asked again), not the data key.
	if _, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("named2"), Body: bytes.NewReader(data),
		ServerSideEncryption: types.ServerSideEncryptionAwsKms, SSEKMSKeyId: aws.String(key.ID), BucketKeyEnabled: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	m1, m2 := e.storedSSE("kms", "named"), e.storedSSE("kms", "named2")
	if !m1.BucketKey || !bytes.Equal(m1.SealedBucketKey, m2.SealedBucketKey) || bytes.Equal(m1.SealedKey, m2.SealedKey) {
		t.Fatalf("bucket keys: %v, same bucket key %v, same data key %v", m1.BucketKey,
			bytes.Equal(m1.SealedBucketKey, m2.SealedBucketKey), bytes.Equal(m1.SealedKey, m2.SealedKey))
	}
	// Unknown and disabled keys are 400s with the KMS codes.
	_, err = e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("x"), Body: bytes.NewReader(data),
		ServerSideEncryption: types.ServerSideEncryptionAwsKms, SSEKMSKeyId: aws.String("no-such-key")})
	e.wantCode(err, "KMS.NotFoundException")
	if _, err := e.gw.cfg.KMS.SetEnabled(key.ID, false); err != nil {
		t.Fatal(err)
	}
	_, err = e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String("named")})
	e.wantCode(err, "KMS.DisabledException")
	_, err = e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("y"), Body: bytes.NewReader(data),
		ServerSideEncryption: types.ServerSideEncryptionAwsKms, SSEKMSKeyId: aws.String(key.ID)})
	e.wantCode(err, "KMS.DisabledException")
	e.gw.cfg.KMS.SetEnabled(key.ID, true)
	if got, _ := e.getBody(&s3.GetObjectInput{Bucket: b, Key: aws.String("named")}); !bytes.Equal(got, data) {
		t.Fatal("GET after enabling the key again")
	}
	// A malformed context, a key id without aws:kms.
	_, err = e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("z"), Body: bytes.NewReader(data),
		ServerSideEncryption: types.ServerSideEncryptionAwsKms, SSEKMSEncryptionContext: aws.String("not base64 json")})
	e.wantCode(err, "InvalidArgument")
	_, err = e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("z"), Body: bytes.NewReader(data),
		ServerSideEncryption: types.ServerSideEncryptionAes256, SSEKMSKeyId: aws.String(key.ID)})
	e.wantCode(err, "InvalidArgument")
}

func TestBucketDefaultEncryption(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("defenc")
	b := aws.String("defenc")
	_, err := e.c.GetBucketEncryption(e.ctx, &s3.GetBucketEncryptionInput{Bucket: b})
	e.wantCode(err, "ServerSideEncryptionConfigurationNotFoundError")
	_, err = e.c.PutBucketEncryption(e.ctx, &s3.PutBucketEncryptionInput{Bucket: b, ServerSideEncryptionConfiguration: &types.ServerSideEncryptionConfiguration{
		Rules: []types.ServerSideEncryptionRule{{ApplyServerSideEncryptionByDefault: &types.ServerSideEncryptionByDefault{SSEAlgorithm: types.ServerSideEncryptionAwsKms}, BucketKeyEnabled: aws.Bool(true)}}}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.c.GetBucketEncryption(e.ctx, &s3.GetBucketEncryptionInput{Bucket: b})
	if err != nil || got.ServerSideEncryptionConfiguration.Rules[0].ApplyServerSideEncryptionByDefault.SSEAlgorithm != types.ServerSideEncryptionAwsKms ||
		!aws.ToBool(got.ServerSideEncryptionConfiguration.Rules[0].BucketKeyEnabled) {
		t.Fatalf("GetBucketEncryption: %v", err)
	}
	put, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("o"), Body: strings.NewReader("hello")})
	if err != nil || put.ServerSideEncryption != types.ServerSideEncryptionAwsKms || !aws.ToBool(put.BucketKeyEnabled) {
		t.Fatalf("PUT under a default: %v %q", err, put.ServerSideEncryption)
	}
	// A request's own header wins over the default.
	put, err = e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("s3"), Body: strings.NewReader("hello"), ServerSideEncryption: types.ServerSideEncryptionAes256})
	if err != nil || put.ServerSideEncryption != types.ServerSideEncryptionAes256 {
		t.Fatalf("PUT with its own SSE: %v %q", err, put.ServerSideEncryption)
	}
	cp, err := e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String("copy"), CopySource: aws.String("defenc/s3")})
	if err != nil || cp.ServerSideEncryption != types.ServerSideEncryptionAwsKms {
		t.Fatalf("copy under a default: %v %q", err, cp.ServerSideEncryption)
	}
	mu, err := e.c.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("mp")})
	if err != nil || mu.ServerSideEncryption != types.ServerSideEncryptionAwsKms {
		t.Fatalf("multipart under a default: %v %q", err, mu.ServerSideEncryption)
	}
	if _, err := e.c.DeleteBucketEncryption(e.ctx, &s3.DeleteBucketEncryptionInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	_, err = e.c.GetBucketEncryption(e.ctx, &s3.GetBucketEncryptionInput{Bucket: b})
	e.wantCode(err, "ServerSideEncryptionConfigurationNotFoundError")
	put, err = e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("p"), Body: strings.NewReader("hello")})
	if err != nil || put.ServerSideEncryption != "" {
		t.Fatalf("PUT after the default went: %v %q", err, put.ServerSideEncryption)
	}
}

// TestSSEMultipart: an SSE-C upload whose parts each need the key, one part
// copied from an SSE-S3 object; ranges and part numbers of the result.
func TestSSEMultipart(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("ssemp")
	b, k := aws.String("ssemp"), aws.String("big")
	ck := newSSEC()
	p1, p2 := plaintext(150<<10), bytes.ToUpper(plaintext(120<<10))
	p3 := []byte("the last part")
	if _, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("src"), Body: bytes.NewReader(p2),
		ServerSideEncryption: types.ServerSideEncryptionAes256}); err != nil {
		t.Fatal(err)
	}
	mu, err := e.c.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: k,
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(ck.key), SSECustomerKeyMD5: aws.String(ck.md5)})
	if err != nil || aws.ToString(mu.SSECustomerAlgorithm) != "AES256" {
		t.Fatalf("create: %v", err)
	}
	_, err = e.c.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: b, Key: k, UploadId: mu.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(p1)})
	e.wantCode(err, "InvalidRequest")
	up1, err := e.c.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: b, Key: k, UploadId: mu.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(p1),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(ck.key), SSECustomerKeyMD5: aws.String(ck.md5)})
	if err != nil {
		t.Fatal(err)
	}
	up2, err := e.c.UploadPartCopy(e.ctx, &s3.UploadPartCopyInput{Bucket: b, Key: k, UploadId: mu.UploadId, PartNumber: aws.Int32(2), CopySource: aws.String("ssemp/src"),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(ck.key), SSECustomerKeyMD5: aws.String(ck.md5)})
	if err != nil {
		t.Fatal(err)
	}
	up3, err := e.c.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: b, Key: k, UploadId: mu.UploadId, PartNumber: aws.Int32(3), Body: bytes.NewReader(p3),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(ck.key), SSECustomerKeyMD5: aws.String(ck.md5)})
	if err != nil {
		t.Fatal(err)
	}
	parts, err := e.c.ListParts(e.ctx, &s3.ListPartsInput{Bucket: b, Key: k, UploadId: mu.UploadId})
	if err != nil || len(parts.Parts) != 3 || aws.ToInt64(parts.Parts[1].Size) != int64(len(p2)) {
		t.Fatalf("ListParts: %v", err)
	}
	_, err = e.c.CompleteMultipartUpload(e.ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: k, UploadId: mu.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{
			{PartNumber: aws.Int32(1), ETag: up1.ETag}, {PartNumber: aws.Int32(2), ETag: up2.CopyPartResult.ETag}, {PartNumber: aws.Int32(3), ETag: up3.ETag}}}})
	if err != nil {
		t.Fatal(err)
	}
	all := bytes.Join([][]byte{p1, p2, p3}, nil)
	get := func(rng string, part int32) []byte {
		in := &s3.GetObjectInput{Bucket: b, Key: k, SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(ck.key), SSECustomerKeyMD5: aws.String(ck.md5)}
		if rng != "" {
			in.Range = aws.String(rng)
		}
		if part > 0 {
			in.PartNumber = aws.Int32(part)
		}
		body, _ := e.getBody(in)
		return body
	}
	if !bytes.Equal(get("", 0), all) {
		t.Fatal("whole object differs")
	}
	if !bytes.Equal(get("", 2), p2) || !bytes.Equal(get("", 3), p3) {
		t.Fatal("partNumber read differs")
	}
	lo, hi := len(p1)-5, len(p1)+len(p2)+3 // across both part boundaries
	if !bytes.Equal(get(fmt.Sprintf("bytes=%d-%d", lo, hi), 0), all[lo:hi+1]) {
		t.Fatal("range across parts differs")
	}
	if !bytes.Equal(get("bytes=-7", 0), all[len(all)-7:]) {
		t.Fatal("suffix range differs")
	}
	_, err = e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: b, Key: k})
	e.wantCode(err, "InvalidRequest")
}

// TestSSECopyReencrypts copies between every kind, and rotates an SSE-C
// key in place.
func TestSSECopyReencrypts(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("ssecp")
	b := aws.String("ssecp")
	data := plaintext(70 << 10)
	c1, c2 := newSSEC(), newSSEC()
	if _, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("c"), Body: bytes.NewReader(data),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(c1.key), SSECustomerKeyMD5: aws.String(c1.md5)}); err != nil {
		t.Fatal(err)
	}
	// SSE-C source without its key: refused.
	_, err := e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String("s3"), CopySource: aws.String("ssecp/c"), ServerSideEncryption: types.ServerSideEncryptionAes256})
	e.wantCode(err, "InvalidRequest")
	// SSE-C -> SSE-S3.
	cp, err := e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String("s3"), CopySource: aws.String("ssecp/c"), ServerSideEncryption: types.ServerSideEncryptionAes256,
		CopySourceSSECustomerAlgorithm: aws.String("AES256"), CopySourceSSECustomerKey: aws.String(c1.key), CopySourceSSECustomerKeyMD5: aws.String(c1.md5)})
	if err != nil || cp.ServerSideEncryption != types.ServerSideEncryptionAes256 {
		t.Fatalf("SSE-C to SSE-S3: %v", err)
	}
	if got, _ := e.getBody(&s3.GetObjectInput{Bucket: b, Key: aws.String("s3")}); !bytes.Equal(got, data) {
		t.Fatal("SSE-S3 copy differs")
	}
	// SSE-S3 -> SSE-KMS.
	cp, err = e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String("kms"), CopySource: aws.String("ssecp/s3"), ServerSideEncryption: types.ServerSideEncryptionAwsKms})
	if err != nil || cp.ServerSideEncryption != types.ServerSideEncryptionAwsKms {
		t.Fatalf("SSE-S3 to SSE-KMS: %v", err)
	}
	// SSE-KMS -> SSE-C.
	_, err = e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String("c2"), CopySource: aws.String("ssecp/kms"),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(c2.key), SSECustomerKeyMD5: aws.String(c2.md5)})
	if err != nil {
		t.Fatalf("SSE-KMS to SSE-C: %v", err)
	}
	// Rotate the SSE-C key of "c" in place (no metadata change needed).
	_, err = e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String("c"), CopySource: aws.String("ssecp/c"),
		CopySourceSSECustomerAlgorithm: aws.String("AES256"), CopySourceSSECustomerKey: aws.String(c1.key), CopySourceSSECustomerKeyMD5: aws.String(c1.md5),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(c2.key), SSECustomerKeyMD5: aws.String(c2.md5)})
	if err != nil {
		t.Fatalf("key rotation: %v", err)
	}
	for _, key := range []string{"c", "c2"} {
		got, _ := e.getBody(&s3.GetObjectInput{Bucket: b, Key: aws.String(key),
			SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(c2.key), SSECustomerKeyMD5: aws.String(c2.md5)})
		if !bytes.Equal(got, data) {
			t.Fatalf("%s under the second key differs", key)
		}
	}
	_, err = e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String("c"),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(c1.key), SSECustomerKeyMD5: aws.String(c1.md5)})
	e.wantCode(err, "AccessDenied")
}

// TestSSEVersionsAndRetriedParts: versions of one key under different
// SSE-C keys each open with their own key; a part uploaded twice (a retry)
// gets a fresh nonce base, and the object reads back as the last upload.
func TestSSEVersionsAndRetriedParts(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("ssever")
	b, k := aws.String("ssever"), aws.String("k")
	if _, err := e.c.PutBucketVersioning(e.ctx, &s3.PutBucketVersioningInput{Bucket: b,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	keys := []ssec{newSSEC(), newSSEC()}
	var vids []string
	for i, ck := range keys {
		put, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: k, Body: strings.NewReader(fmt.Sprint("version ", i)),
			SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(ck.key), SSECustomerKeyMD5: aws.String(ck.md5)})
		if err != nil {
			t.Fatal(err)
		}
		vids = append(vids, aws.ToString(put.VersionId))
	}
	for i, ck := range keys {
		got, _ := e.getBody(&s3.GetObjectInput{Bucket: b, Key: k, VersionId: aws.String(vids[i]),
			SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(ck.key), SSECustomerKeyMD5: aws.String(ck.md5)})
		if string(got) != fmt.Sprint("version ", i) {
			t.Fatalf("version %d: %q", i, got)
		}
		other := keys[1-i]
		_, err := e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: b, Key: k, VersionId: aws.String(vids[i]),
			SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(other.key), SSECustomerKeyMD5: aws.String(other.md5)})
		e.wantCode(err, "AccessDenied")
	}

	mu, err := e.c.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("mp"), ServerSideEncryption: types.ServerSideEncryptionAes256})
	if err != nil {
		t.Fatal(err)
	}
	first, second := plaintext(1000), bytes.ToUpper(plaintext(1000))
	var etag *string
	for _, body := range [][]byte{first, second} {
		up, err := e.c.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: b, Key: aws.String("mp"), UploadId: mu.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(body)})
		if err != nil || up.ServerSideEncryption != types.ServerSideEncryptionAes256 {
			t.Fatalf("UploadPart: %v %q", err, up.ServerSideEncryption)
		}
		if strings.Trim(aws.ToString(up.ETag), `"`) != md5hex(body) {
			t.Fatal("an SSE-S3 part's ETag is not the MD5 of its plaintext")
		}
		etag = up.ETag
	}
	done, err := e.c.CompleteMultipartUpload(e.ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: aws.String("mp"), UploadId: mu.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: etag}}}})
	if err != nil || done.ServerSideEncryption != types.ServerSideEncryptionAes256 {
		t.Fatalf("complete: %v", err)
	}
	if got, _ := e.getBody(&s3.GetObjectInput{Bucket: b, Key: aws.String("mp")}); !bytes.Equal(got, second) {
		t.Fatal("the retried part does not read back")
	}
}
