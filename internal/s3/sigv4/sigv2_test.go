package sigv4

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The Signature Version 2 examples of the S3 developer guide ("Signing and
// Authenticating REST Requests"): bucket johnsmith, virtual-hosted.
func v2ExampleVerifier(now time.Time) *Verifier {
	return &Verifier{
		Creds: StaticCredentials{exampleAK: exampleSK},
		Now:   func() time.Time { return now },
		VirtualHostBucket: func(host string) (string, bool) {
			b, ok := strings.CutSuffix(host, ".s3.amazonaws.com")
			return b, ok
		},
	}
}

func TestV2Examples(t *testing.T) {
	get := func() *http.Request {
		return newServerRequest("GET", "/photos/puppy.jpg", "johnsmith.s3.amazonaws.com", nil, map[string]string{
			"Date":          "Tue, 27 Mar 2007 19:36:42 +0000",
			"Authorization": "AWS AKIAIOSFODNN7EXAMPLE:bWq2s1WEIj+Ydj0vQ697zp+IXMU=",
		})
	}
	getTime := time.Date(2007, 3, 27, 19, 40, 0, 0, time.UTC)
	res, err := v2ExampleVerifier(getTime).Verify(get())
	if err != nil {
		t.Fatal(err)
	}
	if !res.SignatureV2 || res.AccessKey != exampleAK || res.PayloadMode != PayloadUnsigned {
		t.Fatalf("%+v", res)
	}
	r := newServerRequest("PUT", "/photos/puppy.jpg", "johnsmith.s3.amazonaws.com", strings.NewReader("x"), map[string]string{
		"Content-Type":  "image/jpeg",
		"Date":          "Tue, 27 Mar 2007 21:15:45 +0000",
		"Authorization": "AWS AKIAIOSFODNN7EXAMPLE:MyyxeRY7whkBe+bq8fHCL/2kKUg=",
	})
	if _, err := v2ExampleVerifier(time.Date(2007, 3, 27, 21, 15, 0, 0, time.UTC)).Verify(r); err != nil {
		t.Fatal(err)
	}
	presigned := func() *http.Request {
		return newServerRequest("GET", "/photos/puppy.jpg?AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Signature=NpgCjnDzrM%2BWFzoENXmpNDUsSn8%3D&Expires=1175139620",
			"johnsmith.s3.amazonaws.com", nil, nil)
	}
	if res, err := v2ExampleVerifier(time.Unix(1175139620, 0)).Verify(presigned()); err != nil || !res.Presigned {
		t.Fatalf("%+v %v", res, err)
	}
	if _, err := v2ExampleVerifier(time.Unix(1175139621, 0)).Verify(presigned()); !errors.Is(err, ErrExpired) {
		t.Fatalf("expired v2: %v", err)
	}

	// Tampering.
	for name, f := range map[string]func(r *http.Request){
		"path":        func(r *http.Request) { r.URL.Path = "/photos/kitten.jpg"; r.RequestURI = r.URL.Path },
		"bucket":      func(r *http.Request) { r.Host = "janedoe.s3.amazonaws.com" },
		"date":        func(r *http.Request) { r.Header.Set("Date", "Tue, 27 Mar 2007 19:36:43 +0000") },
		"subresource": func(r *http.Request) { r.URL.RawQuery = "acl"; r.RequestURI += "?acl" },
		"amz header":  func(r *http.Request) { r.Header.Set("X-Amz-Acl", "public-read") },
		"method":      func(r *http.Request) { r.Method = "DELETE" },
	} {
		r := get()
		f(r)
		if _, err := v2ExampleVerifier(getTime).Verify(r); !errors.Is(err, ErrSignatureDoesNotMatch) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Unsigned query parameters do not matter in V2 (as in S3).
	r = get()
	r.URL.RawQuery = "x-id=GetObject"
	if _, err := v2ExampleVerifier(getTime).Verify(r); err != nil {
		t.Errorf("non-subresource parameter: %v", err)
	}
	if _, err := v2ExampleVerifier(getTime.Add(time.Hour)).Verify(get()); !errors.Is(err, ErrRequestTimeTooSkewed) {
		t.Errorf("skew: %v", err)
	}
	v := v2ExampleVerifier(getTime)
	v.DisableV2 = true
	if _, err := v.Verify(get()); !errors.Is(err, ErrUnsupportedAuth) {
		t.Errorf("disabled: %v", err)
	}
	// Without the virtual-host hook the bucket is not in the resource.
	v = v2ExampleVerifier(getTime)
	v.VirtualHostBucket = nil
	if _, err := v.Verify(get()); !errors.Is(err, ErrSignatureDoesNotMatch) {
		t.Errorf("no host hook: %v", err)
	}
}
