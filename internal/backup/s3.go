package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// S3Config reaches an S3 destination.
type S3Config struct {
	Endpoint   string // e.g. http://127.0.0.1:8333; "" = AWS
	Region     string // "" = us-east-1
	AccessKey  string
	SecretKey  string
	HTTPClient *http.Client
}

// s3Dest keeps a backup in a bucket: PREFIX/state.json, and each entry as
// an object under PREFIX/data/ (a directory as an empty object whose key
// ends in '/'), its mode, mtime and symlink target in user metadata.
type s3Dest struct {
	c      *s3.Client
	up     *manager.Uploader
	bucket string
	prefix string // "" or ending in '/'
}

const (
	metaMode  = "kelp-mode"
	metaMtime = "kelp-mtime"
	metaLink  = "kelp-link"
)

func openS3(ctx context.Context, spec string, cfg S3Config) (Dest, error) {
	rest := strings.TrimPrefix(spec, "s3://")
	bucket, prefix, _ := strings.Cut(rest, "/")
	if bucket == "" {
		return nil, fmt.Errorf("backup: %q names no bucket (s3://bucket/prefix)", spec)
	}
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	c := newS3Client(cfg)
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)}); err != nil {
		return nil, fmt.Errorf("backup: bucket %s: %w", bucket, err)
	}
	return &s3Dest{c: c, up: manager.NewUploader(c), bucket: bucket, prefix: prefix}, nil
}

func newS3Client(cfg S3Config) *s3.Client {
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	opts := s3.Options{
		Region:                     cfg.Region,
		UsePathStyle:               cfg.Endpoint != "",
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if cfg.HTTPClient != nil {
		opts.HTTPClient = cfg.HTTPClient
	}
	if cfg.Endpoint != "" {
		opts.BaseEndpoint = aws.String(cfg.Endpoint)
	}
	if cfg.AccessKey != "" {
		ak, sk := cfg.AccessKey, cfg.SecretKey
		opts.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk, Source: "kelp"}, nil
		})
	}
	return s3.New(opts)
}

func (d *s3Dest) key(rel string) string { return d.prefix + "data/" + rel }

func notFound(err error) bool {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NotFound", "NoSuchKey", "404":
			return true
		}
	}
	var nf *types.NotFound
	var nk *types.NoSuchKey
	return errors.As(err, &nf) || errors.As(err, &nk)
}

func (d *s3Dest) LoadState(ctx context.Context) (State, bool, error) {
	out, err := d.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &d.bucket, Key: aws.String(d.prefix + "state.json")})
	if notFound(err) {
		return State{}, false, nil
	}
	if err != nil {
		return State{}, false, err
	}
	defer out.Body.Close()
	var st State
	if err := json.NewDecoder(out.Body).Decode(&st); err != nil {
		return State{}, false, fmt.Errorf("backup: state.json: %w", err)
	}
	return st, true, nil
}

func (d *s3Dest) SaveState(ctx context.Context, st State) error {
	b, _ := json.MarshalIndent(st, "", "  ")
	_, err := d.c.PutObject(ctx, &s3.PutObjectInput{Bucket: &d.bucket, Key: aws.String(d.prefix + "state.json"),
		Body: bytes.NewReader(b), ContentType: aws.String("application/json")})
	return err
}

func metaFrom(md map[string]string, size int64, dir bool) Meta {
	mode, _ := strconv.ParseUint(md[metaMode], 8, 32)
	ns, _ := strconv.ParseInt(md[metaMtime], 10, 64)
	m := Meta{Mode: os.FileMode(mode), Size: size, Link: md[metaLink]}
	if ns != 0 {
		m.Mtime = time.Unix(0, ns)
	}
	if dir {
		m.Mode |= os.ModeDir
		m.Size = 0
	}
	if m.Link != "" {
		m.Size = 0
	}
	m.Attrs = attrsFromMeta(md)
	return m
}

func metaTo(m Meta) map[string]string {
	md := map[string]string{metaMode: strconv.FormatUint(uint64(m.Mode), 8), metaMtime: strconv.FormatInt(m.Mtime.UnixNano(), 10)}
	if m.Link != "" {
		md[metaLink] = m.Link
	}
	attrsToMeta(md, m.Attrs)
	return md
}

func (d *s3Dest) head(ctx context.Context, key string) (map[string]string, int64, bool, error) {
	out, err := d.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &d.bucket, Key: aws.String(key)})
	if notFound(err) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, err
	}
	return out.Metadata, aws.ToInt64(out.ContentLength), true, nil
}

func (d *s3Dest) Stat(ctx context.Context, rel string) (Meta, bool, error) {
	md, size, ok, err := d.head(ctx, d.key(rel))
	if err != nil || ok {
		return metaFrom(md, size, false), ok, err
	}
	md, _, ok, err = d.head(ctx, d.key(rel)+"/")
	return metaFrom(md, 0, true), ok, err
}

func (d *s3Dest) Put(ctx context.Context, rel string, m Meta, r io.Reader) error {
	if err := d.deletePrefix(ctx, d.key(rel)+"/"); err != nil { // a directory in the way
		return err
	}
	_, err := d.up.Upload(ctx, &s3.PutObjectInput{Bucket: &d.bucket, Key: aws.String(d.key(rel)), Body: r, Metadata: metaTo(m)})
	return err
}

func (d *s3Dest) Mkdir(ctx context.Context, rel string, m Meta) error {
	if _, _, ok, err := d.head(ctx, d.key(rel)); err != nil {
		return err
	} else if ok { // a file in the way
		if _, err := d.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &d.bucket, Key: aws.String(d.key(rel))}); err != nil {
			return err
		}
	}
	_, err := d.c.PutObject(ctx, &s3.PutObjectInput{Bucket: &d.bucket, Key: aws.String(d.key(rel) + "/"),
		Body: bytes.NewReader(nil), Metadata: metaTo(m)})
	return err
}

// list calls fn for every key under prefix, in key order.
func (d *s3Dest) list(ctx context.Context, prefix string, fn func(types.Object) error) error {
	p := s3.NewListObjectsV2Paginator(d.c, &s3.ListObjectsV2Input{Bucket: &d.bucket, Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, o := range page.Contents {
			if err := fn(o); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *s3Dest) deletePrefix(ctx context.Context, prefix string) error {
	return d.list(ctx, prefix, func(o types.Object) error {
		_, err := d.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &d.bucket, Key: o.Key})
		return err
	})
}

func (d *s3Dest) Delete(ctx context.Context, rel string) error {
	if rel == "" {
		return nil
	}
	if _, err := d.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &d.bucket, Key: aws.String(d.key(rel))}); err != nil && !notFound(err) {
		return err
	}
	return d.deletePrefix(ctx, d.key(rel)+"/")
}

// Rename copies every object of from (a file, or a directory and what is
// under it) to to, then deletes the originals: S3 has no rename.
func (d *s3Dest) Rename(ctx context.Context, from, to string) error {
	if err := d.Delete(ctx, to); err != nil {
		return err
	}
	var keys []string
	if _, _, ok, err := d.head(ctx, d.key(from)); err != nil {
		return err
	} else if ok {
		keys = append(keys, d.key(from))
	}
	err := d.list(ctx, d.key(from)+"/", func(o types.Object) error {
		keys = append(keys, aws.ToString(o.Key))
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range keys {
		nk := d.key(to) + strings.TrimPrefix(k, d.key(from))
		if _, err := d.c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &d.bucket, Key: aws.String(nk),
			CopySource: aws.String(d.bucket + "/" + k)}); err != nil {
			return err
		}
	}
	for _, k := range keys {
		if _, err := d.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &d.bucket, Key: aws.String(k)}); err != nil {
			return err
		}
	}
	return nil
}

func (d *s3Dest) Walk(ctx context.Context, fn func(rel string, m Meta) error) error {
	base := d.key("")
	return d.list(ctx, base, func(o types.Object) error {
		k := strings.TrimPrefix(aws.ToString(o.Key), base)
		dir := strings.HasSuffix(k, "/")
		rel := strings.TrimSuffix(k, "/")
		if rel == "" {
			return nil
		}
		md, size, ok, err := d.head(ctx, aws.ToString(o.Key)) // listings carry no user metadata
		if err != nil || !ok {
			return err
		}
		return fn(rel, metaFrom(md, size, dir))
	})
}

func (d *s3Dest) Open(ctx context.Context, rel string) (io.ReadCloser, error) {
	out, err := d.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &d.bucket, Key: aws.String(d.key(rel))})
	if err != nil {
		return nil, err
	}
	return out.Body, nil
}
