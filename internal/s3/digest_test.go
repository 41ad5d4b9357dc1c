package s3

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// A wrong x-amz-checksum-* is BadDigest and a body that does not hash to
// the signed x-amz-content-sha256 is XAmzContentSHA256Mismatch, both 400,
// and nothing is stored.
func TestDigestMismatches(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("digests")
	b := aws.String("digests")
	_, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("crc"), Body: strings.NewReader("hello"),
		ChecksumCRC32: aws.String("AAAAAA==")})
	e.wantCode(err, "BadDigest")
	_, err = e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("sha"), Body: strings.NewReader("hello"),
		ChecksumSHA256: aws.String("47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=")})
	e.wantCode(err, "BadDigest")
	up, err := e.c.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("mp")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.c.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: b, Key: aws.String("mp"), UploadId: up.UploadId, PartNumber: aws.Int32(1),
		Body: strings.NewReader("part"), ChecksumCRC32C: aws.String("AAAAAA==")})
	e.wantCode(err, "BadDigest")
	parts, err := e.c.ListParts(e.ctx, &s3.ListPartsInput{Bucket: b, Key: aws.String("mp"), UploadId: up.UploadId})
	if err != nil || len(parts.Parts) != 0 {
		t.Fatalf("a refused part was kept: %v %+v", err, parts)
	}

	// Signed for another body.
	other := sha256.Sum256([]byte("other"))
	req, err := http.NewRequest(http.MethodPut, e.gw.URL()+"/digests/tampered", bytes.NewReader([]byte("hello")))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-amz-content-sha256", hex.EncodeToString(other[:]))
	if err := v4.NewSigner().SignHTTP(e.ctx, aws.Credentials{AccessKeyID: testAK, SecretAccessKey: testSK}, req,
		hex.EncodeToString(other[:]), "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), "<Code>XAmzContentSHA256Mismatch</Code>") {
		t.Fatalf("tampered body: %d %s", resp.StatusCode, body)
	}
	for _, k := range []string{"crc", "sha", "tampered"} {
		if _, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String(k)}); code(err) != "NotFound" {
			t.Errorf("%s was stored: %v", k, err)
		}
	}
}
