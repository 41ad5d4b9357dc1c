package sigv4

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// These tests drive the verifier with requests signed by aws-sdk-go-v2
// (the S3 client with its default settings, and its presigner) over real
// HTTP, so header handling, Host and path escaping are exactly what a
// gateway sees.

func sdkClient(rs *recordingServer, optFns ...func(*s3.Options)) *s3.Client {
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(rs.srv.URL),
		UsePathStyle: true,
		HTTPClient:   rs.srv.Client(),
		Retryer:      aws.NopRetryer{},
		// What config.LoadDefaultConfig gives every real client.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenSupported,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: testAK, SecretAccessKey: testSK}, nil
		}),
	}, optFns...)
}

func TestSDKPutGetTrickyKeys(t *testing.T) {
	for _, tls := range []bool{false, true} {
		rs := newRecordingServer(t, tls)
		c := sdkClient(rs)
		streamed := 0
		ctx := context.Background()
		for _, key := range trickyKeys {
			body := []byte("payload of " + key)
			_, err := c.PutObject(ctx, &s3.PutObjectInput{
				Bucket:   aws.String("bucket"),
				Key:      aws.String(key),
				Body:     bytes.NewReader(body),
				Metadata: map[string]string{"note": "  two   spaces  "},
			})
			if err != nil {
				t.Fatalf("tls=%v put %q: %v", tls, key, err)
			}
			s := rs.last()
			if s.err != nil || !bytes.Equal(s.body, body) || s.path != "/bucket/"+key {
				t.Fatalf("tls=%v put %q: path %q err %v body %q", tls, key, s.path, s.err, s.body)
			}
			t.Logf("tls=%v put %q: mode %v", tls, key, s.res.PayloadMode)
			if s.res.PayloadMode.Streaming() {
				// The SDK's default flexible checksum rides in the trailer.
				want := base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(body)))
				got := s.trailer.Get("X-Amz-Checksum-Crc32")
				if got != want || s.res.DecodedContentLength != int64(len(body)) {
					t.Fatalf("tls=%v put %q: trailer %v decoded %d (want crc %s)", tls, key, s.trailer, s.res.DecodedContentLength, want)
				}
				streamed++
			}

			if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket"), Key: aws.String(key)}); err != nil {
				t.Fatalf("tls=%v get %q: %v", tls, key, err)
			}
			if s := rs.last(); s.err != nil || s.res.AccessKey != testAK {
				t.Fatalf("get %q: %v", key, s.err)
			}
		}
		_, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{
			Bucket: aws.String("bucket"), Prefix: aws.String("a b+c/ключ"), Delimiter: aws.String("/"),
			StartAfter: aws.String("~x=y&z"), MaxKeys: aws.Int32(7),
		})
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		if s := rs.last(); s.err != nil {
			t.Fatal(s.err)
		}
		// Over TLS the SDK's default is STREAMING-UNSIGNED-PAYLOAD-TRAILER.
		if tls != (streamed == len(trickyKeys)) {
			t.Fatalf("tls=%v: %d of %d uploads streamed", tls, streamed, len(trickyKeys))
		}
	}
}

func TestSDKModesSeen(t *testing.T) {
	// Over TLS the SDK streams with STREAMING-UNSIGNED-PAYLOAD-TRAILER and a
	// CRC32 trailer; a non-seekable body forces it even more. Check the
	// verifier decoded the trailer mode at least once, so the trailer path
	// is exercised by a real client and not only by hand-made bodies.
	rs := newRecordingServer(t, true)
	c := sdkClient(rs)
	body := strings.Repeat("0123456789", 20000)
	_, err := c.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String("bucket"), Key: aws.String("big object"),
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: aws.Int64(int64(len(body))),
	})
	if err != nil {
		t.Fatal(err)
	}
	s := rs.last()
	if s.err != nil || string(s.body) != body {
		t.Fatalf("err %v, %d bytes", s.err, len(s.body))
	}
	if s.res.PayloadMode != PayloadStreamingUnsignedTrailer || s.trailer.Get("X-Amz-Checksum-Crc32") == "" {
		t.Fatalf("mode %v trailer %v", s.res.PayloadMode, s.trailer)
	}
}

func TestSDKUnsignedPayload(t *testing.T) {
	rs := newRecordingServer(t, false)
	c := sdkClient(rs, func(o *s3.Options) {
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
	})
	_, err := c.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String("bucket"), Key: aws.String("k"), Body: strings.NewReader("unsigned body"),
	})
	if err != nil {
		t.Fatal(err)
	}
	s := rs.last()
	if s.err != nil || s.res.PayloadMode != PayloadUnsigned || string(s.body) != "unsigned body" {
		t.Fatalf("mode %v err %v body %q", s.res.PayloadMode, s.err, s.body)
	}
}

func TestSDKWrongSecret(t *testing.T) {
	rs := newRecordingServer(t, false)
	rs.verifier.Creds = StaticCredentials{testAK: "another secret"}
	c := sdkClient(rs)
	_, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
	if err == nil || !strings.Contains(err.Error(), "SignatureDoesNotMatch") {
		t.Fatalf("client error %v", err)
	}
	if s := rs.last(); !errors.Is(s.err, ErrSignatureDoesNotMatch) {
		t.Fatalf("server error %v", s.err)
	}
	rs.verifier.Creds = StaticCredentials{}
	_, err = c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
	if err == nil || !strings.Contains(err.Error(), "InvalidAccessKeyId") {
		t.Fatalf("client error %v", err)
	}
	rs.take()
}

func TestSDKRegionPolicy(t *testing.T) {
	rs := newRecordingServer(t, false)
	c := sdkClient(rs, func(o *s3.Options) { o.Region = "eu-central-1" })
	get := func() error {
		_, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
		return err
	}
	if err := get(); err != nil {
		t.Fatalf("any region accepted when Region is empty: %v", err)
	}
	if s := rs.last(); s.res.Region != "eu-central-1" {
		t.Fatalf("region %q", s.res.Region)
	}
	rs.verifier.Region = "us-east-1"
	if err := get(); err == nil {
		t.Fatal("wrong region accepted")
	}
	if s := rs.last(); !errors.Is(s.err, ErrAuthorizationHeaderMalformed) {
		t.Fatalf("wrong region: %v", s.err)
	}
}

func TestSDKPresign(t *testing.T) {
	rs := newRecordingServer(t, false)
	pc := s3.NewPresignClient(sdkClient(rs))
	ctx := context.Background()
	for _, key := range trickyKeys {
		get, err := pc.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket"), Key: aws.String(key),
			ResponseContentDisposition: aws.String(`attachment; filename="a b.txt"`)},
			s3.WithPresignExpires(10*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rs.srv.Client().Get(get.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		s := rs.last()
		if s.err != nil || resp.StatusCode != 200 || !s.res.Presigned || s.path != "/bucket/"+key {
			t.Fatalf("presigned get %q: status %d err %v path %q", key, resp.StatusCode, s.err, s.path)
		}

		put, err := pc.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket"), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(put.Method, put.URL, strings.NewReader("presigned body"))
		for k, v := range put.SignedHeader {
			if !strings.EqualFold(k, "host") {
				req.Header[k] = v
			}
		}
		resp, err = rs.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		s = rs.last()
		if s.err != nil || string(s.body) != "presigned body" || s.res.PayloadMode != PayloadUnsigned {
			t.Fatalf("presigned put %q: err %v body %q", key, s.err, s.body)
		}
	}
}

func TestSDKPresignExpiredAndTampered(t *testing.T) {
	rs := newRecordingServer(t, false)
	pc := s3.NewPresignClient(sdkClient(rs))
	get, err := pc.PresignGetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")},
		s3.WithPresignExpires(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	rs.verifier.Now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	resp, err := rs.srv.Client().Get(get.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s := rs.last(); !errors.Is(s.err, ErrExpired) || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("expired: status %d err %v", resp.StatusCode, s.err)
	}
	rs.verifier.Now = nil
	for _, tamper := range []func(string) string{
		func(u string) string { return strings.Replace(u, "/b/k?", "/b/K?", 1) },
		func(u string) string { return u + "&extra=1" },
		func(u string) string { return strings.Replace(u, "X-Amz-Expires=60", "X-Amz-Expires=600", 1) },
	} {
		u := tamper(get.URL)
		if u == get.URL {
			t.Fatalf("tamper did nothing to %s", u)
		}
		resp, err := rs.srv.Client().Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if s := rs.last(); !errors.Is(s.err, ErrSignatureDoesNotMatch) {
			t.Fatalf("tampered %s: %v", u, s.err)
		}
	}
}
