package s3bench

import (
	"context"
	"crypto/md5"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/kelpfs/kelp/internal/benchmark"
	"github.com/kelpfs/kelp/internal/security"
)

// ErrConfig is returned (wrapped) by Run for an unusable Config.
var ErrConfig = errors.New("s3bench: bad config")

// Defaults of the zero Config fields.
const (
	DefaultConcurrency     = 16
	DefaultPartSize        = 16 << 20
	DefaultPartConcurrency = 8
	minPartSize            = 5 << 20 // S3's smallest non-last part
)

// Config is what `kelp benchmark s3` was asked to do.
type Config struct {
	Endpoint  string // http://host:port
	AccessKey string
	SecretKey string
	Region    string // "" means us-east-1
	Bucket    string // created when missing
	// Prefix is prepended to the run's keys, which are
	// Prefix + "s3bench-<nonce>/<index>"; "" puts them at the bucket's root.
	Prefix      string
	Size        int64 // bytes per object
	Count       int   // objects to put, then get
	Concurrency int   // objects in flight per phase; 0 means 16
	// PartSize is the size from which an object is put by multipart upload
	// and read by ranges, and the size of those parts and ranges; 0 means
	// 16 MiB, and it is at least 5 MiB.
	PartSize int64
	// PartConcurrency is the parts or ranges of one object in flight; 0
	// means 8.
	PartConcurrency int
	// SignPayload signs each body's SHA-256 instead of UNSIGNED-PAYLOAD.
	SignPayload bool
	// Checksums lets the SDK send CRC32 checksums on PUT and check them on
	// GET (its default behaviour; off here so the client spends its CPU on
	// requests).
	Checksums bool
	// Cleanup deletes the run's objects after the GET phase.
	Cleanup bool
	// JSON adds, as the last line of Out, {"put":{...},"get":{...}}.
	JSON bool
	// Out receives the report; nil discards it.
	Out io.Writer
	// Progress receives a bar per phase when it is a terminal; nil shows none.
	Progress io.Writer
	// HTTPClient overrides the tuned default (tests).
	HTTPClient *http.Client
	// Logger receives the first failures of each phase; nil discards.
	Logger *slog.Logger
	// Seed makes contents and read order repeatable; 0 picks one.
	Seed uint64
	// Cold empties the page cache of this machine between the PUT and the
	// GET phase, as benchmark.Config.Cold.
	Cold bool
	// DropCaches is what Cold calls; nil means benchmark.DropPageCache.
	DropCaches func() error
	// SSE asks for server-side encryption of the objects: "AES256"
	// (SSE-S3), "aws:kms" (SSE-KMS, default key), "SSE-C" (a random
	// customer key per run, sent on every PUT and GET); "" none.
	SSE string
}

// Report is the result of a run; its JSON form is the last line of --json.
type Report struct {
	Put benchmark.Phase `json:"put"`
	Get benchmark.Phase `json:"get"`
}

// Failed is the number of failed requests in both phases.
func (r *Report) Failed() int { return r.Put.Failed + r.Get.Failed }

// Err is nil when no request failed, else the error `kelp benchmark s3`
// exits with: the count and the first failure.
func (r *Report) Err() error {
	return benchmark.FailuresErr([]string{"put", "get"}, []benchmark.Phase{r.Put, r.Get})
}

func (cfg *Config) normalize() error {
	switch {
	case cfg.Endpoint == "":
		return fmt.Errorf("%w: no endpoint", ErrConfig)
	case !strings.HasPrefix(cfg.Endpoint, "http://") && !strings.HasPrefix(cfg.Endpoint, "https://"):
		return fmt.Errorf("%w: endpoint %q is not an http:// or https:// URL", ErrConfig, cfg.Endpoint)
	case cfg.Bucket == "":
		return fmt.Errorf("%w: no bucket", ErrConfig)
	case cfg.Count <= 0:
		return fmt.Errorf("%w: the number of objects must be positive, got %d", ErrConfig, cfg.Count)
	case cfg.Size < 0:
		return fmt.Errorf("%w: negative object size %d", ErrConfig, cfg.Size)
	case cfg.Concurrency < 0 || cfg.PartConcurrency < 0:
		return fmt.Errorf("%w: negative concurrency", ErrConfig)
	case cfg.PartSize != 0 && cfg.PartSize < minPartSize:
		return fmt.Errorf("%w: part size %d is below S3's minimum of 5 MiB", ErrConfig, cfg.PartSize)
	case cfg.SSE != "" && cfg.SSE != "AES256" && cfg.SSE != "aws:kms" && cfg.SSE != sseC:
		return fmt.Errorf("%w: --sse is AES256, aws:kms or SSE-C, not %q", ErrConfig, cfg.SSE)
	}
	if cfg.Cold && cfg.DropCaches == nil {
		if err := benchmark.CheckDropPageCache(); err != nil {
			return err
		}
		cfg.DropCaches = benchmark.DropPageCache
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.PartSize == 0 {
		cfg.PartSize = DefaultPartSize
	}
	if cfg.PartConcurrency == 0 {
		cfg.PartConcurrency = DefaultPartConcurrency
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64()
	}
	return nil
}

// bench is what the workers of a run share, read-only.
type bench struct {
	cfg      Config
	client   *s3.Client
	uploader *manager.Uploader
	content  *content
	prefix   string // of every key of this run
	// sseKey and sseKeyMD5 are the run's SSE-C key, base64 as sent.
	sseKey, sseKeyMD5 string
}

const sseC = "SSE-C"

// newSSECKey returns a random SSE-C key and its MD5, base64-encoded.
func newSSECKey() (string, string) {
	k := make([]byte, 32)
	crand.Read(k)
	sum := md5.Sum(k)
	return base64.StdEncoding.EncodeToString(k), base64.StdEncoding.EncodeToString(sum[:])
}

// worker is one goroutine's reusable buffer for verifying bodies.
type worker struct{ buf []byte }

const verifyBuffer = 256 << 10 // ReadBufferSize of newClient's transport, or more

// Run puts cfg.Count objects, gets them back, prints the report to cfg.Out
// and returns it. Failed requests are counted, not returned; an error means
// the run could not start (bad config, bucket not creatable) or ctx ended,
// in which case the report so far is returned too.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	b := &bench{cfg: cfg, content: newContent(cfg.Seed)}
	if cfg.SSE == sseC {
		b.sseKey, b.sseKeyMD5 = newSSECKey()
	}
	b.prefix = fmt.Sprintf("%ss3bench-%016x/", cfg.Prefix, b.content.nonce)
	b.client = newClient(&cfg)
	b.uploader = manager.NewUploader(b.client, func(u *manager.Uploader) {
		u.PartSize = cfg.PartSize
		u.Concurrency = cfg.PartConcurrency
		// The upload manager has its own checksum default (CRC32 on every
		// part, which over plain HTTP also makes the SDK sign each part's
		// SHA-256); follow --checksums like single PUTs do.
		u.RequestChecksumCalculation = b.client.Options().RequestChecksumCalculation
	})
	if err := b.ensureBucket(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Out, "S3 benchmark: %d objects of %d bytes, concurrency %d, %s/%s/%s\n\n",
		cfg.Count, cfg.Size, cfg.Concurrency, cfg.Endpoint, cfg.Bucket, b.prefix)

	rep := &Report{}
	stored := make([]bool, cfg.Count)
	workers := make([]worker, cfg.Concurrency)
	phase := func(name string) benchmark.PhaseOptions {
		return benchmark.PhaseOptions{Name: name, Unit: "obj", Concurrency: cfg.Concurrency, Progress: cfg.Progress, Logger: cfg.Logger}
	}
	rep.Put = benchmark.RunPhase(ctx, phase("put"), cfg.Count, func(_, i int) (int64, error) {
		if err := b.put(ctx, i); err != nil {
			return 0, err
		}
		stored[i] = true
		return cfg.Size, nil
	})
	benchmark.PrintPhase(cfg.Out, "put", "objects", rep.Put)
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("s3bench: %w", err)
	}

	if cfg.Cold {
		fmt.Fprintf(cfg.Out, "Dropping the page cache before reading (sync; echo 1 > /proc/sys/vm/drop_caches)\n\n")
		if err := cfg.DropCaches(); err != nil {
			return rep, err
		}
	}
	var order []int
	for i, ok := range stored {
		if ok {
			order = append(order, i)
		}
	}
	rand.New(rand.NewPCG(cfg.Seed, 1)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	rep.Get = benchmark.RunPhase(ctx, phase("get"), len(order), func(wi, i int) (int64, error) {
		w := &workers[wi]
		if w.buf == nil {
			w.buf = make([]byte, verifyBuffer)
		}
		return cfg.Size, b.get(ctx, w, order[i])
	})
	benchmark.PrintPhase(cfg.Out, "get", "objects", rep.Get, benchmark.ReadNote(cfg.Cold))
	if cfg.Cleanup {
		if err := b.cleanup(ctx, order); err != nil {
			fmt.Fprintf(cfg.Out, "cleanup: %v\n\n", err)
		}
	}
	if cfg.JSON {
		line, err := json.Marshal(rep)
		if err != nil {
			return rep, fmt.Errorf("s3bench: encoding report: %w", err)
		}
		if _, err := fmt.Fprintf(cfg.Out, "%s\n", line); err != nil {
			return rep, fmt.Errorf("s3bench: writing report: %w", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("s3bench: %w", err)
	}
	return rep, nil
}

// newClient is an SDK client for cfg: path-style, static keys, no retries,
// and an HTTP transport with an idle connection kept for every request that
// can be in flight, so that no request pays for a handshake.
func newClient(cfg *Config) *s3.Client {
	hc := cfg.HTTPClient
	if hc == nil {
		inflight := cfg.Concurrency * max(1, cfg.PartConcurrency)
		hc = &http.Client{Transport: &http.Transport{
			Proxy:               nil, // a benchmark of 127.0.0.1 must not go through $HTTP_PROXY
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        2 * inflight,
			MaxIdleConnsPerHost: 2 * inflight,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true, // bodies are random; and MB/s must count body bytes
			WriteBufferSize:     256 << 10,
			ReadBufferSize:      256 << 10,
			TLSClientConfig:     security.Process().ClientConfig(), // an https endpoint: the CA of --tls.ca
		}}
	}
	ak, sk := cfg.AccessKey, cfg.SecretKey
	opts := s3.Options{
		Region:       cfg.Region,
		BaseEndpoint: aws.String(cfg.Endpoint),
		UsePathStyle: true,
		HTTPClient:   hc,
		Retryer:      aws.NopRetryer{},
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk, Source: "s3bench"}, nil
		}),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if cfg.Checksums {
		opts.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenSupported
		opts.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenSupported
	}
	if !cfg.SignPayload {
		opts.APIOptions = append(opts.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
	}
	return s3.New(opts)
}

// ensureBucket creates the bucket unless it exists and is ours.
func (b *bench) ensureBucket(ctx context.Context) error {
	_, err := b.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b.cfg.Bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	if err == nil || errors.As(err, &owned) {
		return nil
	}
	if _, herr := b.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(b.cfg.Bucket)}); herr == nil {
		return nil
	}
	return fmt.Errorf("s3bench: creating bucket %s: %w", b.cfg.Bucket, err)
}

func (b *bench) key(i int) string { return fmt.Sprintf("%s%08d", b.prefix, i) }

// put stores object i: one PutObject, or a multipart upload above PartSize.
func (b *bench) put(ctx context.Context, i int) error {
	body := &object{c: b.content, i: i, size: b.cfg.Size}
	in := &s3.PutObjectInput{
		Bucket: aws.String(b.cfg.Bucket), Key: aws.String(b.key(i)), Body: body,
		ContentType: aws.String("application/octet-stream"),
	}
	switch b.cfg.SSE {
	case "":
	case sseC:
		in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String("AES256"), aws.String(b.sseKey), aws.String(b.sseKeyMD5)
	default:
		in.ServerSideEncryption = types.ServerSideEncryption(b.cfg.SSE)
	}
	if b.cfg.Size > b.cfg.PartSize {
		_, err := b.uploader.Upload(ctx, in)
		return err
	}
	in.ContentLength = aws.Int64(b.cfg.Size)
	_, err := b.client.PutObject(ctx, in)
	return err
}

// get reads object i back and checks every byte: one streamed GET, or
// PartSize ranges PartConcurrency at a time above PartSize.
func (b *bench) get(ctx context.Context, w *worker, i int) error {
	size, part := b.cfg.Size, b.cfg.PartSize
	if size <= part {
		return b.getRange(ctx, w.buf, i, 0, size, false)
	}
	ranges := make(chan int64)
	errc := make(chan error, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range b.cfg.PartConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, verifyBuffer)
			for off := range ranges {
				if err := b.getRange(ctx, buf, i, off, min(part, size-off), true); err != nil {
					select {
					case errc <- err:
					default:
					}
					cancel()
				}
			}
		}()
	}
feed:
	for off := int64(0); off < size; off += part {
		select {
		case ranges <- off:
		case <-ctx.Done():
			break feed
		}
	}
	close(ranges)
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return ctx.Err()
	}
}

func (b *bench) getRange(ctx context.Context, buf []byte, i int, off, n int64, ranged bool) error {
	in := &s3.GetObjectInput{Bucket: aws.String(b.cfg.Bucket), Key: aws.String(b.key(i))}
	if b.cfg.SSE == sseC {
		in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String("AES256"), aws.String(b.sseKey), aws.String(b.sseKeyMD5)
	}
	if ranged {
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	}
	out, err := b.client.GetObject(ctx, in)
	if err != nil {
		return err
	}
	defer out.Body.Close()
	return b.content.verify(out.Body, i, off, n, buf)
}

// cleanup deletes the objects listed, 1,000 per DeleteObjects request.
func (b *bench) cleanup(ctx context.Context, objects []int) error {
	for len(objects) > 0 {
		n := min(1000, len(objects))
		ids := make([]types.ObjectIdentifier, n)
		for j, i := range objects[:n] {
			ids[j] = types.ObjectIdentifier{Key: aws.String(b.key(i))}
		}
		out, err := b.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: aws.String(b.cfg.Bucket), Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
		})
		if err != nil {
			return fmt.Errorf("s3bench: deleting objects: %w", err)
		}
		if len(out.Errors) > 0 {
			return fmt.Errorf("s3bench: deleting %s: %s", aws.ToString(out.Errors[0].Key), aws.ToString(out.Errors[0].Message))
		}
		objects = objects[n:]
	}
	return nil
}
