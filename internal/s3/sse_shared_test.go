package s3

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/kelpfs/kelp/internal/kms"
	"github.com/kelpfs/kelp/internal/sse"
)

// TestSSEKMSAcrossGateways: two gateways over one filer, each with its own
// key directory and the same master key. An object encrypted through A
// under a KMS key created through A (and one under the default key, and
// an SSE-S3 one) reads through B; a third gateway with another master key
// does not start.
func TestSSEKMSAcrossGateways(t *testing.T) {
	master := sse.NewKey()
	kmsWith := func(m []byte) *kms.Service {
		k, err := kms.Open(t.TempDir(), m)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	a := startEnv(t, func(c *Config) { c.KMS = kmsWith(master) })
	cfgB := a.gw.cfg
	cfgB.Port, cfgB.KMS = 0, kmsWith(master)
	gwB, err := New(cfgB)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gwB.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	b := &env{t: t, gw: gwB, fs: a.fs, ctx: context.Background()}
	b.c = b.client(testAK, testSK)

	a.mkBucket("shared")
	key, err := a.gw.cfg.KMS.Create("team", "")
	if err != nil {
		t.Fatal(err)
	}
	data := plaintext(200 << 10)
	for name, in := range map[string]*s3.PutObjectInput{
		"named":   {ServerSideEncryption: types.ServerSideEncryptionAwsKms, SSEKMSKeyId: aws.String("alias/team")},
		"default": {ServerSideEncryption: types.ServerSideEncryptionAwsKms},
		"s3":      {ServerSideEncryption: types.ServerSideEncryptionAes256},
	} {
		in.Bucket, in.Key, in.Body = aws.String("shared"), aws.String(name), bytes.NewReader(data)
		if _, err := a.c.PutObject(a.ctx, in); err != nil {
			t.Fatalf("PUT %s through A: %v", name, err)
		}
		got, out := b.getBody(&s3.GetObjectInput{Bucket: aws.String("shared"), Key: aws.String(name)})
		if !bytes.Equal(got, data) {
			t.Fatalf("GET %s through B: the plaintext differs", name)
		}
		if name == "named" && aws.ToString(out.SSEKMSKeyId) != key.ID {
			t.Fatalf("GET through B names key %q, want %s", aws.ToString(out.SSEKMSKeyId), key.ID)
		}
	}
	// B writes under A's named key, A reads it.
	if _, err := b.c.PutObject(b.ctx, &s3.PutObjectInput{Bucket: aws.String("shared"), Key: aws.String("fromB"), Body: bytes.NewReader(data),
		ServerSideEncryption: types.ServerSideEncryptionAwsKms, SSEKMSKeyId: aws.String(key.ID)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.getBody(&s3.GetObjectInput{Bucket: aws.String("shared"), Key: aws.String("fromB")}); !bytes.Equal(got, data) {
		t.Fatal("GET through A of B's object: the plaintext differs")
	}

	cfgC := a.gw.cfg
	cfgC.Port, cfgC.KMS, cfgC.Logger = 0, kmsWith(sse.NewKey()), slog.New(slog.DiscardHandler)
	if _, err := New(cfgC); !errors.Is(err, kms.ErrMasterMismatch) {
		t.Fatalf("a gateway with another master key: %v", err)
	}
}
