package s3

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/kms"
	"github.com/kelpfs/kelp/internal/sse"
	"github.com/kelpfs/kelp/internal/testcluster"
)

const (
	testAK = "AKIDTESTADMIN"
	testSK = "secret-admin-0123456789"
)

// env is a cluster, a filer and a gateway on loopback.
type env struct {
	t       testing.TB
	cluster *testcluster.Cluster
	gw      *Server
	fs      *filerserver.Server
	c       *s3.Client
	ctx     context.Context
}

// chunkSize is small so that modest objects span several chunks.
const chunkSize = 64 << 10

func startEnv(t testing.TB, mod func(*Config)) *env {
	t.Helper()
	return startEnvChunks(t, chunkSize, mod)
}

// startEnvChunks is startEnv with the filer's chunk size given.
func startEnvChunks(t testing.TB, chunks int, mod func(*Config)) *env {
	t.Helper()
	return startEnvFiler(t, chunks, nil, mod)
}

// startEnvFiler is startEnvChunks with the filer's configuration changed
// by fmod too.
func startEnvFiler(t testing.TB, chunks int, fmod func(*filerserver.Config), mod func(*Config)) *env {
	t.Helper()
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}}})
	fcfg := filerserver.Config{Masters: c.MasterAddrs(), Dir: t.TempDir(), ChunkSize: chunks,
		GCDelay: -1, Logger: slog.New(slog.DiscardHandler)}
	if fmod != nil {
		fmod(&fcfg)
	}
	fs, err := filerserver.New(fcfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	fdone := make(chan error, 1)
	go func() { fdone <- fs.Run(ctx) }()
	cfg := Config{
		Namespace:   fs.Filer(),
		Identities:  []Identity{{Name: "admin", Credentials: []Credential{{testAK, testSK}}, Actions: []string{"Admin"}}},
		MinPartSize: 100 << 10,
		Logger:      slog.New(slog.DiscardHandler),
		KMS:         testKMS(t),
	}
	if mod != nil {
		mod(&cfg)
	}
	gw, err := New(cfg)
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

// testKMS is a key service with a fresh master key in a temporary directory.
func testKMS(t testing.TB) *kms.Service {
	t.Helper()
	k, err := kms.Open(t.TempDir(), sse.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (e *env) client(ak, sk string, opts ...func(*s3.Options)) *s3.Client {
	return s3.New(s3.Options{
		Region:                     "us-east-1",
		BaseEndpoint:               aws.String(e.gw.URL()),
		UsePathStyle:               true,
		Retryer:                    aws.NopRetryer{},
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenSupported,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenSupported,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk}, nil
		}),
		HTTPClient: &http.Client{},
	}, opts...)
}

// code returns the S3 error code of err ("" for nil).
func code(err error) string {
	if err == nil {
		return ""
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return err.Error()
}

func (e *env) wantCode(err error, want string) {
	e.t.Helper()
	if got := code(err); got != want {
		e.t.Fatalf("error code %q, want %q (err %v)", got, want, err)
	}
}

func (e *env) mkBucket(name string) {
	e.t.Helper()
	if _, err := e.c.CreateBucket(e.ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		e.t.Fatalf("create bucket %s: %v", name, err)
	}
}

// raw sends a request signed with the admin key (UNSIGNED-PAYLOAD) and
// returns the response with its body read.
func (e *env) raw(method, path string, body []byte, hdr map[string]string) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.gw.URL()+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	req.Header.Set("x-amz-content-sha256", "UNSIGNED-PAYLOAD")
	signer := v4.NewSigner()
	err = signer.SignHTTP(e.ctx, aws.Credentials{AccessKeyID: testAK, SecretAccessKey: testSK}, req,
		"UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}
