package sigv4

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

var testNow = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

func testVerifier() *Verifier {
	return &Verifier{Creds: StaticCredentials{testAK: testSK}, Now: func() time.Time { return testNow }}
}

// sdkSign signs r (a server-side request from httptest.NewRequest) with
// aws-sdk-go-v2's signer the way its S3 client does (no double path
// escaping), at time at.
func sdkSign(t testing.TB, r *http.Request, payloadHash string, at time.Time) {
	t.Helper()
	if payloadHash != "" {
		r.Header.Set("X-Amz-Content-Sha256", payloadHash)
	}
	s := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	creds := aws.Credentials{AccessKeyID: testAK, SecretAccessKey: testSK}
	if err := s.SignHTTP(context.Background(), creds, r, payloadHash, "s3", "us-east-1", at); err != nil {
		t.Fatal(err)
	}
}

// sdkPresign returns the presigned target (path?query) for r.
func sdkPresign(t testing.TB, r *http.Request, expires time.Duration, at time.Time) string {
	t.Helper()
	q := r.URL.Query()
	q.Set("X-Amz-Expires", strconv.Itoa(int(expires/time.Second)))
	r.URL.RawQuery = q.Encode()
	s := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	creds := aws.Credentials{AccessKeyID: testAK, SecretAccessKey: testSK}
	u, _, err := s.PresignHTTP(context.Background(), creds, r, "UNSIGNED-PAYLOAD", "s3", "us-east-1", at)
	if err != nil {
		t.Fatal(err)
	}
	_, target, _ := strings.Cut(strings.TrimPrefix(u, "http://"), "/")
	return "/" + target
}

// chunkSigner produces aws-chunked bodies the way a client does, with
// the signing chain computed from the documented string-to-sign formats.
type chunkSigner struct {
	key     []byte
	amzDate string
	scope   string
	prev    string
}

func newChunkSigner(seed string, at time.Time) *chunkSigner {
	return &chunkSigner{
		key:     signingKey(testSK, at.Format(dateFormat), "us-east-1", "s3"),
		amzDate: at.Format(timeFormat),
		scope:   at.Format(dateFormat) + "/us-east-1/s3/aws4_request",
		prev:    seed,
	}
}

func (cs *chunkSigner) sign(data []byte) string {
	sum := sha256.Sum256(data)
	sts := "AWS4-HMAC-SHA256-PAYLOAD\n" + cs.amzDate + "\n" + cs.scope + "\n" + cs.prev + "\n" + emptySHA256 + "\n" + hex.EncodeToString(sum[:])
	cs.prev = hex.EncodeToString(hmacSHA256(cs.key, sts))
	return cs.prev
}

func (cs *chunkSigner) signTrailer(canon string) string {
	sts := "AWS4-HMAC-SHA256-TRAILER\n" + cs.amzDate + "\n" + cs.scope + "\n" + cs.prev + "\n" + sha256Hex(canon)
	return hex.EncodeToString(hmacSHA256(cs.key, sts))
}

// chunked encodes data in chunks of size n. cs nil means unsigned. Each
// trailer is "name:value"; a signed trailer gets its signature line.
func chunked(cs *chunkSigner, data []byte, n int, trailers ...string) []byte {
	var b bytes.Buffer
	for off := 0; ; off = min(off+n, len(data)) {
		end := min(off+n, len(data))
		chunk := data[off:end]
		fmt.Fprintf(&b, "%x", len(chunk))
		if cs != nil {
			b.WriteString(";chunk-signature=" + cs.sign(chunk))
		}
		b.WriteString("\r\n")
		if len(chunk) == 0 {
			break
		}
		b.Write(chunk)
		b.WriteString("\r\n")
	}
	var canon strings.Builder
	for _, tr := range trailers {
		b.WriteString(tr + "\r\n")
		canon.WriteString(tr + "\n")
	}
	if cs != nil && len(trailers) > 0 {
		b.WriteString("x-amz-trailer-signature:" + cs.signTrailer(canon.String()) + "\r\n")
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

// streamingRequest builds and signs (with the SDK signer, which yields the
// seed signature) a PUT whose body is produced by encode from the seed.
func streamingRequest(t testing.TB, mode string, decodedLen int, trailerNames string, encode func(seed string) []byte) *http.Request {
	t.Helper()
	r := httptest.NewRequest("PUT", "/bucket/streamed%20object", nil)
	r.Header.Set("Content-Encoding", "aws-chunked")
	r.Header.Set("X-Amz-Decoded-Content-Length", strconv.Itoa(decodedLen))
	if trailerNames != "" {
		r.Header.Set("X-Amz-Trailer", trailerNames)
	}
	sdkSign(t, r, mode, testNow)
	seed := r.Header.Get("Authorization")
	seed = seed[strings.LastIndex(seed, "Signature=")+len("Signature="):]
	body := encode(seed)
	r.Body = http.NoBody
	if len(body) > 0 {
		r.Body = nopCloser{bytes.NewReader(body)}
	}
	return r
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }
