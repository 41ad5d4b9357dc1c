package s3

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

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
		Namespace:  fs.Filer(),
		Identities: []Identity{{Name: "admin", Credentials: []Credential{{testAK, testSK}}, Actions: []string{"Admin"}}},
		Logger:     slog.New(slog.DiscardHandler),
		KMS:        testKMS(t),
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	gdone := make(chan error, 1)
	go func() { gdone <- gw.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-gdone; <-fdone })
	e := &env{t: t, gw: gw, fs: fs, ctx: context.Background()}
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
