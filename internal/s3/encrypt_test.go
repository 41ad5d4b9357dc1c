package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"io"
	"log/slog"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/testcluster"
)

// startEnvEncrypt is startEnvChunks with the filer's --encrypt-data set.
func startEnvEncrypt(t testing.TB, chunks int, encrypt bool) *env {
	t.Helper()
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}}})
	fs, err := filerserver.New(filerserver.Config{Masters: c.MasterAddrs(), Dir: t.TempDir(), ChunkSize: chunks,
		EncryptData: encrypt, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	fdone := make(chan error, 1)
	go func() { fdone <- fs.Run(ctx) }()
	gw, err := New(Config{
		Namespace:   fs.Filer(),
		Identities:  []Identity{{Name: "admin", Credentials: []Credential{{testAK, testSK}}, Actions: []string{"Admin"}}},
		Logger:      slog.New(slog.DiscardHandler),
		KMS:         testKMS(t),
		MinPartSize: 100 << 10,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	gdone := make(chan error, 1)
	go func() { gdone <- gw.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-gdone; <-fdone })
	e := &env{t: t, cluster: c, gw: gw, fs: fs, ctx: context.Background()}
	e.c = e.client(testAK, testSK)
	return e
}

// BenchmarkObjectPutGet1MiBEncrypt: 1 MiB PutObject and GetObject through
// the AWS SDK, with the filer's chunks stored plain and encrypted at rest
// (--encrypt-data); the ratio of the two is the cost of the encryption.
func BenchmarkObjectPutGet1MiBEncrypt(b *testing.B) {
	data := randBytes(1 << 20)
	for _, enc := range []struct {
		name string
		on   bool
	}{{"plain", false}, {"encrypted", true}} {
		e := startEnvEncrypt(b, 8<<20, enc.on)
		e.mkBucket("bench")
		b.Run("put-"+enc.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("bench"), Key: aws.String("obj"), Body: bytes.NewReader(data)}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("get-"+enc.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				out, err := e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("bench"), Key: aws.String("obj")})
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, out.Body)
				out.Body.Close()
				if err != nil || n != int64(len(data)) {
					b.Fatalf("GET: %d bytes, %v", n, err)
				}
			}
		})
	}
}

// TestEncryptDataObjects: with --encrypt-data every chunk of a plain object,
// of a multipart object and of a copy carries its own key and reads back;
// an SSE-S3 object is not encrypted a second time (its chunks carry no key)
// and reads back too.
func TestEncryptDataObjects(t *testing.T) {
	e := startEnvEncrypt(t, 64<<10, true)
	e.mkBucket("enc")
	ctx := e.ctx
	data := randBytes(300 << 10)
	put := func(key string, sse bool) {
		in := &s3.PutObjectInput{Bucket: aws.String("enc"), Key: aws.String(key), Body: bytes.NewReader(data)}
		if sse {
			in.ServerSideEncryption = "AES256"
		}
		if _, err := e.c.PutObject(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	put("plain", false)
	put("sse", true)
	up, err := e.c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("enc"), Key: aws.String("multi")})
	if err != nil {
		t.Fatal(err)
	}
	var parts []types.CompletedPart
	for i, part := range [][]byte{data[:150<<10], data[150<<10:]} {
		n := int32(i + 1)
		out, err := e.c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("enc"), Key: aws.String("multi"), UploadId: up.UploadId, PartNumber: aws.Int32(n), Body: bytes.NewReader(part)})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(n)})
	}
	if _, err := e.c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("enc"), Key: aws.String("multi"), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("enc"), Key: aws.String("copy"), CopySource: aws.String("enc/plain")}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"plain", "sse", "multi", "copy"} {
		ent, err := e.fs.Filer().FindEntry(ctx, "/buckets/enc/"+key)
		if err != nil {
			t.Fatal(err)
		}
		if len(ent.Chunks) < 2 {
			t.Fatalf("%s: %d chunks, want several", key, len(ent.Chunks))
		}
		for _, c := range ent.Chunks {
			if sealed := c.CipherKey != nil; sealed != (key != "sse") {
				t.Errorf("%s: chunk %s sealed %v", key, c.FID, sealed)
			}
		}
		out, err := e.c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("enc"), Key: aws.String(key), Range: aws.String("bytes=65000-140000")})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil || !bytes.Equal(got, data[65000:140001]) {
			t.Fatalf("%s: range read: %d bytes, %v", key, len(got), err)
		}
	}
	h, err := e.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("enc"), Key: aws.String("plain")})
	if err != nil {
		t.Fatal(err)
	}
	if sum := md5.Sum(data); aws.ToString(h.ETag) != `"`+hex.EncodeToString(sum[:])+`"` {
		t.Errorf("ETag %s is not the plaintext MD5", aws.ToString(h.ETag))
	}
}
