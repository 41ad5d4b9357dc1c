package sigv4

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzParseAuthorization: any header value either parses into a
// well-formed auth or fails with an *Error; never a panic.
func FuzzParseAuthorization(f *testing.F) {
	f.Add("AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
	f.Add("AWS4-HMAC-SHA256 Credential=a/b/c/d/20130524/r/s3/aws4_request, SignedHeaders=host, Signature=")
	f.Add("AWS4-HMAC-SHA256 Credential=,,,=")
	f.Add("AWS4-HMAC-SHA256")
	f.Add("AWS AKID:sig")
	f.Add("AWS AKIAIOSFODNN7EXAMPLE:bWq2s1WEIj+Ydj0vQ697zp+IXMU=")
	f.Fuzz(func(t *testing.T, h string) {
		// The whole verifier (V4 and V2 paths) must not panic and must
		// answer with a 4xx *Error: nothing here is validly signed.
		r := httptest.NewRequest("GET", "/b/k", nil)
		r.Header.Set("Authorization", h)
		r.Header.Set("X-Amz-Date", "20130524T000000Z")
		r.Header.Set("Date", "Fri, 24 May 2013 00:00:00 GMT")
		r.Header.Set("X-Amz-Content-Sha256", emptySHA256)
		if res, err := exampleVerifier().Verify(r); err == nil && !res.Anonymous {
			t.Fatalf("accepted %q as %+v", h, res)
		} else if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status < 400 || e.Status > 499 {
				t.Fatalf("error %v is not a 4xx *Error", err)
			}
		}
		a, err := parseAuthorization(h)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status != http.StatusBadRequest {
				t.Fatalf("error %v is not a 400 *Error", err)
			}
			return
		}
		if a.accessKey == "" || len(a.signedHeaders) == 0 || !validSignature(a.signature) || a.region == "" {
			t.Fatalf("accepted incomplete auth %+v", a)
		}
	})
}

// FuzzPresignedQuery: arbitrary query strings never panic the verifier.
func FuzzPresignedQuery(f *testing.F) {
	f.Add("X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404")
	f.Add("X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=99999999999999999999")
	f.Add("a=%zz&&=&b")
	f.Fuzz(func(t *testing.T, q string) {
		r := httptest.NewRequest("GET", "/test.txt", nil)
		r.Host = "examplebucket.s3.amazonaws.com"
		r.URL.RawQuery = q
		res, err := exampleVerifier().Verify(r)
		if err == nil && !res.Anonymous && !res.Presigned {
			t.Fatalf("query auth accepted as %+v", res)
		}
	})
}

// FuzzChunkReader feeds arbitrary bytes to the aws-chunked decoder in all
// three modes: it must end in io.EOF or an error, never panic or loop, and
// the unsigned decoder must reproduce the payload of well-formed input.
func FuzzChunkReader(f *testing.F) {
	f.Add([]byte("5\r\nhello\r\n0\r\nx-amz-checksum-crc32:NhCmhg==\r\n\r\n"), int64(5))
	f.Add([]byte("5;chunk-signature="+string(bytes.Repeat([]byte("a"), 64))+"\r\nhello\r\n0;chunk-signature="+string(bytes.Repeat([]byte("b"), 64))+"\r\n\r\n"), int64(5))
	f.Add([]byte("0\r\n\r\n"), int64(0))
	f.Add([]byte("ffffffffffffffff\r\n"), int64(-1))
	f.Add([]byte("3\r\nabc\n0\r\n\r\n"), int64(3))
	f.Fuzz(func(t *testing.T, body []byte, declared int64) {
		if declared < -1 {
			declared = -1
		}
		for _, cfg := range []chunkConfig{
			{signed: false, trailers: true, declared: declared, expect: []string{"x-amz-checksum-crc32"}},
			{signed: true, trailers: false, declared: declared, key: []byte("k"), seed: "s"},
			{signed: true, trailers: true, declared: declared, key: []byte("k"), seed: "s", expect: []string{"x-amz-checksum-sha256"}},
		} {
			cr := newChunkReader(io.NopCloser(bytes.NewReader(body)), cfg)
			out, err := io.ReadAll(cr)
			if err != nil {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("non-S3 error %v", err)
				}
				continue
			}
			if int64(len(out)) > int64(len(body)) || (declared >= 0 && int64(len(out)) != declared) {
				t.Fatalf("decoded %d bytes from %d, declared %d", len(out), len(body), declared)
			}
			if cfg.signed {
				t.Fatalf("signed body with bogus key accepted: %q", body)
			}
		}
	})
}
