package sigv4

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// signedGet returns a header-signed GET as the server sees it.
func signedGet(t testing.TB, at time.Time) *http.Request {
	t.Helper()
	r := httptest.NewRequest("GET", "/bucket/some%20key+plus?versionId=3&acl&list-type=2&prefix=a%2Fb", nil)
	r.Header.Set("X-Amz-Meta-Note", "  a   b  ")
	r.Header.Add("X-Amz-Meta-Multi", "one")
	r.Header.Add("X-Amz-Meta-Multi", "two")
	sdkSign(t, r, emptySHA256, at)
	return r
}

func TestVerifyHeaderSigned(t *testing.T) {
	r := signedGet(t, testNow)
	res, err := testVerifier().Verify(r)
	if err != nil {
		t.Fatal(err)
	}
	if res.AccessKey != testAK || res.Presigned || res.Anonymous || !res.Time.Equal(testNow) ||
		res.PayloadMode != PayloadSigned || res.PayloadSHA256 != emptySHA256 || res.DecodedContentLength != -1 {
		t.Fatalf("result %+v", res)
	}
}

func TestVerifyTamperedHeaderRequest(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(r *http.Request)
		want   error
	}{
		{"method", func(r *http.Request) { r.Method = "DELETE" }, ErrSignatureDoesNotMatch},
		{"path", func(r *http.Request) { r.URL.Path = "/bucket/some key plus"; r.URL.RawPath = "" }, ErrSignatureDoesNotMatch},
		{"path case", func(r *http.Request) { r.URL.Path = "/Bucket/some key+plus"; r.URL.RawPath = "" }, ErrSignatureDoesNotMatch},
		{"query value", func(r *http.Request) {
			r.URL.RawQuery = strings.Replace(r.URL.RawQuery, "versionId=3", "versionId=4", 1)
		}, ErrSignatureDoesNotMatch},
		{"query added", func(r *http.Request) { r.URL.RawQuery += "&delete" }, ErrSignatureDoesNotMatch},
		{"query removed", func(r *http.Request) { q := r.URL.Query(); q.Del("acl"); r.URL.RawQuery = q.Encode() }, ErrSignatureDoesNotMatch},
		{"empty query value", func(r *http.Request) { q := r.URL.Query(); q.Set("acl", "x"); r.URL.RawQuery = q.Encode() }, ErrSignatureDoesNotMatch},
		{"host", func(r *http.Request) { r.Host = "evil.example.com" }, ErrSignatureDoesNotMatch},
		{"signed header value", func(r *http.Request) { r.Header.Set("X-Amz-Meta-Note", "a c") }, ErrSignatureDoesNotMatch},
		{"multi value order", func(r *http.Request) { r.Header["X-Amz-Meta-Multi"] = []string{"two", "one"} }, ErrSignatureDoesNotMatch},
		{"payload hash", func(r *http.Request) { r.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD") }, ErrSignatureDoesNotMatch},
		{"date", func(r *http.Request) { r.Header.Set("X-Amz-Date", testNow.Add(time.Second).Format(timeFormat)) }, ErrSignatureDoesNotMatch},
		{"unsigned amz header", func(r *http.Request) { r.Header.Set("X-Amz-Copy-Source", "/other/key") }, ErrHeadersNotSigned},
		{"signature", func(r *http.Request) { replaceAuth(r, "Signature=", flipHex) }, ErrSignatureDoesNotMatch},
		{"signed headers list", func(r *http.Request) {
			replaceAuth(r, "SignedHeaders=", func(s string) string { return "host;x-amz-date;" + s })
		}, ErrSignatureDoesNotMatch},
		{"access key", func(r *http.Request) { replaceAuth(r, "Credential=", func(s string) string { return "X" + s }) }, ErrInvalidAccessKeyID},
		{"scope region", func(r *http.Request) { replaceAuth(r, "us-east-1", func(string) string { return "us-west-2" }) }, ErrSignatureDoesNotMatch},
		{"scope service", func(r *http.Request) { replaceAuth(r, "/s3/", func(string) string { return "/ec2/" }) }, ErrAuthorizationHeaderMalformed},
		{"scope date", func(r *http.Request) { replaceAuth(r, "20260314", func(string) string { return "20260315" }) }, ErrAuthorizationHeaderMalformed},
		{"terminator", func(r *http.Request) { replaceAuth(r, "aws4_request", func(string) string { return "aws5_request" }) }, ErrAuthorizationHeaderMalformed},
		{"algorithm", func(r *http.Request) {
			replaceAuth(r, "AWS4-HMAC-SHA256", func(string) string { return "AWS4-HMAC-SHA512" })
		}, ErrUnsupportedAuth},
		{"no content sha", func(r *http.Request) { r.Header.Del("X-Amz-Content-Sha256") }, ErrMissingSecurityHeader},
		{"bad content sha", func(r *http.Request) { r.Header.Set("X-Amz-Content-Sha256", "abc") }, ErrInvalidContentSHA256},
		{"no date", func(r *http.Request) { r.Header.Del("X-Amz-Date") }, ErrMissingDate},
		{"bad date", func(r *http.Request) { r.Header.Set("X-Amz-Date", "2026-03-14T15:09:26Z") }, ErrMissingDate},
		{"v2", func(r *http.Request) { r.Header.Set("Authorization", "AWS "+testAK+":c2lnbmF0dXJl") }, ErrMissingDate},
		{"v2 malformed", func(r *http.Request) { r.Header.Set("Authorization", "AWS "+testAK) }, ErrAuthorizationHeaderMalformed},
		{"v4a", func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256", "AWS4-ECDSA-P256-SHA256", 1))
		}, ErrUnsupportedAuth},
		{"header and query", func(r *http.Request) { r.URL.RawQuery += "&X-Amz-Algorithm=AWS4-HMAC-SHA256" }, ErrMultipleAuth},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := signedGet(t, testNow)
			c.tamper(r)
			_, err := testVerifier().Verify(r)
			if !errors.Is(err, c.want) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
			var e *Error
			if !errors.As(err, &e) || e.Status < 400 || e.Status > 499 || e.Code == "" {
				t.Fatalf("err %#v is not a 4xx *Error", err)
			}
		})
	}
}

func replaceAuth(r *http.Request, marker string, f func(string) string) {
	a := r.Header.Get("Authorization")
	i := strings.Index(a, marker)
	if i < 0 {
		panic("marker " + marker + " not in " + a)
	}
	i += len(marker)
	if strings.HasSuffix(marker, "=") {
		j := strings.IndexAny(a[i:], ",")
		if j < 0 {
			j = len(a) - i
		}
		r.Header.Set("Authorization", a[:i]+f(a[i:i+j])+a[i+j:])
		return
	}
	r.Header.Set("Authorization", a[:i-len(marker)]+f(marker)+a[i:])
}

func flipHex(s string) string {
	b := []byte(s)
	if b[0] == '0' {
		b[0] = '1'
	} else {
		b[0] = '0'
	}
	return string(b)
}

func TestVerifyRegionPinned(t *testing.T) {
	v := testVerifier()
	v.Region = "us-east-1"
	if _, err := v.Verify(signedGet(t, testNow)); err != nil {
		t.Fatal(err)
	}
	v.Region = "kelp-1"
	if _, err := v.Verify(signedGet(t, testNow)); !errors.Is(err, ErrAuthorizationHeaderMalformed) {
		t.Fatalf("err %v", err)
	}
}

func TestVerifySkew(t *testing.T) {
	for _, c := range []struct {
		offset time.Duration
		ok     bool
	}{
		{0, true}, {14 * time.Minute, true}, {-14 * time.Minute, true},
		{16 * time.Minute, false}, {-16 * time.Minute, false}, {-48 * time.Hour, false},
	} {
		_, err := testVerifier().Verify(signedGet(t, testNow.Add(c.offset)))
		if c.ok && err != nil || !c.ok && !errors.Is(err, ErrRequestTimeTooSkewed) {
			t.Errorf("signed %v from now: err %v", c.offset, err)
		}
	}
	v := testVerifier()
	v.MaxSkew = time.Minute
	if _, err := v.Verify(signedGet(t, testNow.Add(2*time.Minute))); !errors.Is(err, ErrRequestTimeTooSkewed) {
		t.Errorf("MaxSkew 1m, signed 2m ahead: %v", err)
	}
	// An X-Amz-Date years off, changed after signing (so that it no longer
	// matches the credential scope's date), is reported as skew, as S3.
	for _, date := range []string{"20100707T215304Z", "20300707T215304Z"} {
		r := signedGet(t, testNow)
		r.Header.Set("X-Amz-Date", date)
		if _, err := testVerifier().Verify(r); !errors.Is(err, ErrRequestTimeTooSkewed) {
			t.Errorf("X-Amz-Date %s after signing: %v", date, err)
		}
	}
}

func TestVerifyDateHeaderOnly(t *testing.T) {
	// Signing with the Date header instead of X-Amz-Date is allowed: the
	// string to sign then carries the Date time in ISO 8601 form.
	r := httptest.NewRequest("GET", "/b/k", nil)
	r.Header.Set("Date", testNow.Format(http.TimeFormat))
	r.Header.Set("X-Amz-Content-Sha256", emptySHA256)
	key := signingKey(testSK, "20260314", "us-east-1", "s3")
	cr := "GET\n/b/k\n\ndate:" + testNow.Format(http.TimeFormat) + "\nhost:example.com\nx-amz-content-sha256:" + emptySHA256 +
		"\n\ndate;host;x-amz-content-sha256\n" + emptySHA256
	sig := hexHMAC(key, stringToSign(testNow.Format(timeFormat), "20260314/us-east-1/s3/aws4_request", cr))
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+testAK+"/20260314/us-east-1/s3/aws4_request, SignedHeaders=date;host;x-amz-content-sha256, Signature="+sig)
	if _, err := testVerifier().Verify(r); err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Date", testNow.Add(time.Second).Format(http.TimeFormat))
	if _, err := testVerifier().Verify(r); !errors.Is(err, ErrSignatureDoesNotMatch) {
		t.Fatal(err)
	}
}

func TestVerifyAnonymous(t *testing.T) {
	r := httptest.NewRequest("PUT", "/b/k", strings.NewReader("body"))
	res, err := testVerifier().Verify(r)
	if err != nil || !res.Anonymous || res.AccessKey != "" {
		t.Fatalf("%+v %v", res, err)
	}
	if b, _ := io.ReadAll(r.Body); string(b) != "body" {
		t.Fatalf("body %q", b)
	}
	r = httptest.NewRequest("GET", "/b/k?AWSAccessKeyId=AK&Signature=x&Expires=1", nil)
	if _, err := testVerifier().Verify(r); !errors.Is(err, ErrExpired) {
		t.Fatalf("presigned v2: %v", err)
	}
	v := testVerifier()
	v.DisableV2 = true
	if _, err := v.Verify(r); !errors.Is(err, ErrUnsupportedAuth) {
		t.Fatalf("presigned v2 disabled: %v", err)
	}
}

func TestVerifyBodyHash(t *testing.T) {
	body := "the body"
	mk := func(sent string) *http.Request {
		r := httptest.NewRequest("PUT", "/b/k", strings.NewReader(sent))
		sdkSign(t, r, sha256Hex(body), testNow)
		return r
	}
	r := mk(body)
	if _, err := testVerifier().Verify(r); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(r.Body); err != nil || string(b) != body {
		t.Fatalf("%q %v", b, err)
	}
	for _, sent := range []string{"the bodY", "the bod", "the body!"} {
		r := mk(sent)
		if _, err := testVerifier().Verify(r); err != nil {
			t.Fatal(err)
		}
		_, err := io.ReadAll(r.Body)
		if !errors.Is(err, ErrContentSHA256Mismatch) {
			t.Fatalf("body %q: %v", sent, err)
		}
		// The error is sticky.
		if _, err := r.Body.Read(make([]byte, 1)); !errors.Is(err, ErrContentSHA256Mismatch) {
			t.Fatalf("second read: %v", err)
		}
	}
}

func TestVerifyPresigned(t *testing.T) {
	mk := func() *http.Request {
		r := httptest.NewRequest("GET", "/bucket/a%20b/%E2%9C%93?response-content-type=text%2Fplain", nil)
		target := sdkPresign(t, r, time.Hour, testNow)
		return httptest.NewRequest("GET", target, nil)
	}
	res, err := testVerifier().Verify(mk())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Presigned || !res.Expires.Equal(testNow.Add(time.Hour)) || res.PayloadMode != PayloadUnsigned {
		t.Fatalf("%+v", res)
	}
	at := func(d time.Duration) *Verifier {
		v := testVerifier()
		v.Now = func() time.Time { return testNow.Add(d) }
		return v
	}
	if _, err := at(59 * time.Minute).Verify(mk()); err != nil {
		t.Fatalf("within expiry: %v", err)
	}
	if _, err := at(61 * time.Minute).Verify(mk()); !errors.Is(err, ErrExpired) {
		t.Fatalf("after expiry: %v", err)
	}
	if _, err := at(-time.Hour).Verify(mk()); !errors.Is(err, ErrNotYetValid) {
		t.Fatalf("signed in the future: %v", err)
	}
	tamper := []struct {
		name string
		f    func(q string) string
		want error
	}{
		{"expires", func(q string) string { return strings.Replace(q, "X-Amz-Expires=3600", "X-Amz-Expires=3601", 1) }, ErrSignatureDoesNotMatch},
		{"expires too long", func(q string) string { return strings.Replace(q, "X-Amz-Expires=3600", "X-Amz-Expires=604801", 1) }, ErrAuthorizationQueryParametersError},
		{"expires negative", func(q string) string { return strings.Replace(q, "X-Amz-Expires=3600", "X-Amz-Expires=-1", 1) }, ErrAuthorizationQueryParametersError},
		{"response param", func(q string) string { return strings.Replace(q, "text%2Fplain", "text%2Fhtml", 1) }, ErrSignatureDoesNotMatch},
		{"added param", func(q string) string { return q + "&x-id=GetObject" }, ErrSignatureDoesNotMatch},
		{"no signature", func(q string) string { return q[:strings.Index(q, "&X-Amz-Signature")] }, ErrAuthorizationQueryParametersError},
		{"two signatures", func(q string) string { return q + "&X-Amz-Signature=" + strings.Repeat("0", 64) }, ErrAuthorizationQueryParametersError},
		{"algorithm", func(q string) string {
			return strings.Replace(q, "X-Amz-Algorithm=AWS4-HMAC-SHA256", "X-Amz-Algorithm=HMAC", 1)
		}, ErrAuthorizationQueryParametersError},
		{"credential", func(q string) string { return strings.Replace(q, testAK, "OTHER", 1) }, ErrInvalidAccessKeyID},
		{"date", func(q string) string { return strings.Replace(q, "T150926Z", "T150927Z", 1) }, ErrSignatureDoesNotMatch},
	}
	for _, c := range tamper {
		r := mk()
		r.URL.RawQuery = c.f(r.URL.RawQuery)
		if _, err := testVerifier().Verify(r); !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
	}
	r := mk()
	r.URL.Path = "/bucket/a b/x"
	r.URL.RawPath = ""
	if _, err := testVerifier().Verify(r); !errors.Is(err, ErrSignatureDoesNotMatch) {
		t.Errorf("path: %v", err)
	}
	r = mk()
	r.Header.Set("X-Amz-Acl", "public-read")
	if _, err := testVerifier().Verify(r); !errors.Is(err, ErrHeadersNotSigned) {
		t.Errorf("unsigned x-amz header: %v", err)
	}
}

func hexHMAC(key []byte, s string) string {
	const hexdigits = "0123456789abcdef"
	m := hmacSHA256(key, s)
	out := make([]byte, 2*len(m))
	for i, c := range m {
		out[2*i], out[2*i+1] = hexdigits[c>>4], hexdigits[c&15]
	}
	return string(out)
}

func TestAnonymousBodies(t *testing.T) {
	data := []byte("anonymous upload")
	r := httptest.NewRequest("PUT", "/b/k", nopCloser{bytes.NewReader(chunked(nil, data, 5, crc32Trailer(data)))})
	r.Header.Set("X-Amz-Content-Sha256", modeUnsignedTrail)
	r.Header.Set("X-Amz-Trailer", "x-amz-checksum-crc32")
	r.Header.Set("X-Amz-Decoded-Content-Length", strconv.Itoa(len(data)))
	res, err := testVerifier().Verify(r)
	if err != nil || !res.Anonymous || res.PayloadMode != PayloadStreamingUnsignedTrailer {
		t.Fatalf("%+v %v", res, err)
	}
	if b, err := io.ReadAll(r.Body); err != nil || !bytes.Equal(b, data) || res.Trailer().Get("x-amz-checksum-crc32") == "" {
		t.Fatalf("%q %v", b, err)
	}
	r = httptest.NewRequest("PUT", "/b/k", strings.NewReader("other"))
	r.Header.Set("X-Amz-Content-Sha256", sha256Hex("body"))
	if _, err := testVerifier().Verify(r); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(r.Body); !errors.Is(err, ErrContentSHA256Mismatch) {
		t.Fatalf("anonymous hash mismatch: %v", err)
	}
	r = httptest.NewRequest("PUT", "/b/k", strings.NewReader("x"))
	r.Header.Set("X-Amz-Content-Sha256", modeSigned)
	if _, err := testVerifier().Verify(r); !errors.Is(err, ErrMissingSecurityHeader) {
		t.Fatalf("anonymous signed streaming: %v", err)
	}
}

func TestContentEncoding(t *testing.T) {
	for in, want := range map[string]string{"aws-chunked": "", "aws-chunked,gzip": "gzip", "gzip, AWS-CHUNKED , br": "gzip,br", "": ""} {
		h := http.Header{}
		if in != "" {
			h.Set("Content-Encoding", in)
		}
		if got := ContentEncoding(h); got != want {
			t.Errorf("ContentEncoding(%q) = %q, want %q", in, got, want)
		}
	}
}
