package sigv4

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The figures in this file are the worked examples of the AWS S3 API
// reference ("Authenticating Requests: AWS Signature Version 4" and its
// sub-pages): credentials AKIAIOSFODNN7EXAMPLE /
// wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY, time 20130524T000000Z,
// region us-east-1.

const (
	exampleAK     = "AKIAIOSFODNN7EXAMPLE"
	exampleSK     = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	exampleScope  = "20130524/us-east-1/s3/aws4_request"
	exampleAmzDay = "20130524T000000Z"
)

var exampleTime = time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC)

func exampleVerifier() *Verifier {
	return &Verifier{
		Creds: StaticCredentials{exampleAK: exampleSK},
		Now:   func() time.Time { return exampleTime.Add(time.Minute) },
	}
}

func exampleAuthz(signed, sig string) string {
	return "AWS4-HMAC-SHA256 Credential=" + exampleAK + "/" + exampleScope +
		",SignedHeaders=" + signed + ",Signature=" + sig
}

// newServerRequest builds a request as net/http's server hands it to a
// handler (Host moved out of the header, RequestURI set).
func newServerRequest(method, target, host string, body io.Reader, hdr map[string]string) *http.Request {
	r := httptest.NewRequest(method, target, body)
	r.Host = host
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	return r
}

func TestAWSExampleGetObject(t *testing.T) {
	r := newServerRequest("GET", "/test.txt", "examplebucket.s3.amazonaws.com", nil, map[string]string{
		"Range":                "bytes=0-9",
		"X-Amz-Content-Sha256": emptySHA256,
		"X-Amz-Date":           exampleAmzDay,
		"Authorization": exampleAuthz("host;range;x-amz-content-sha256;x-amz-date",
			"f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"),
	})
	res, err := exampleVerifier().Verify(r)
	if err != nil {
		t.Fatal(err)
	}
	if res.AccessKey != exampleAK || res.Anonymous || res.Presigned || res.PayloadMode != PayloadSigned || res.Region != "us-east-1" {
		t.Fatalf("result %+v", res)
	}
	if b, err := io.ReadAll(r.Body); err != nil || len(b) != 0 {
		t.Fatalf("body %q %v", b, err)
	}
}

func TestAWSExamplePutObject(t *testing.T) {
	body := "Welcome to Amazon S3."
	hdr := map[string]string{
		"Date":                 "Fri, 24 May 2013 00:00:00 GMT",
		"X-Amz-Date":           exampleAmzDay,
		"X-Amz-Storage-Class":  "REDUCED_REDUNDANCY",
		"X-Amz-Content-Sha256": "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
		"Authorization": exampleAuthz("date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
			"98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"),
	}
	r := newServerRequest("PUT", "/test%24file.text", "examplebucket.s3.amazonaws.com", strings.NewReader(body), hdr)
	if _, err := exampleVerifier().Verify(r); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(r.Body); err != nil || string(b) != body {
		t.Fatalf("body %q %v", b, err)
	}

	// Same signature, different body: the header checks pass, the body
	// read fails at EOF.
	r = newServerRequest("PUT", "/test%24file.text", "examplebucket.s3.amazonaws.com", strings.NewReader("Welcome to Amazon S4."), hdr)
	if _, err := exampleVerifier().Verify(r); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(r.Body); !errors.Is(err, ErrContentSHA256Mismatch) {
		t.Fatalf("tampered body: err %v, want ErrContentSHA256Mismatch", err)
	}
}

func TestAWSExampleGetLifecycle(t *testing.T) {
	r := newServerRequest("GET", "/?lifecycle", "examplebucket.s3.amazonaws.com", nil, map[string]string{
		"X-Amz-Date":           exampleAmzDay,
		"X-Amz-Content-Sha256": emptySHA256,
		"Authorization": exampleAuthz("host;x-amz-content-sha256;x-amz-date",
			"fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"),
	})
	if _, err := exampleVerifier().Verify(r); err != nil {
		t.Fatal(err)
	}
}

func TestAWSExampleListObjects(t *testing.T) {
	r := newServerRequest("GET", "/?max-keys=2&prefix=J", "examplebucket.s3.amazonaws.com", nil, map[string]string{
		"X-Amz-Date":           exampleAmzDay,
		"X-Amz-Content-Sha256": emptySHA256,
		"Authorization": exampleAuthz("host;x-amz-content-sha256;x-amz-date",
			"34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"),
	})
	if _, err := exampleVerifier().Verify(r); err != nil {
		t.Fatal(err)
	}
}

func TestAWSExamplePresignedGet(t *testing.T) {
	target := "/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request" +
		"&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host" +
		"&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
	r := newServerRequest("GET", target, "examplebucket.s3.amazonaws.com", nil, nil)
	v := exampleVerifier()
	res, err := v.Verify(r)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Presigned || res.PayloadMode != PayloadUnsigned || !res.Expires.Equal(exampleTime.Add(24*time.Hour)) {
		t.Fatalf("result %+v", res)
	}
	// One second after X-Amz-Date + X-Amz-Expires the URL is dead.
	v.Now = func() time.Time { return exampleTime.Add(24*time.Hour + time.Second) }
	if _, err := v.Verify(newServerRequest("GET", target, "examplebucket.s3.amazonaws.com", nil, nil)); !errors.Is(err, ErrExpired) {
		t.Fatalf("expired: %v", err)
	}
	var e *Error
	if !errors.As(err, &e) && e != nil {
		t.Fatal("unreachable")
	}
}

// The chunked upload example: a 66560-byte object of 'a' sent as a
// 65536-byte chunk, a 1024-byte chunk and the final empty chunk.
func chunkedExample(t *testing.T, trailer bool) (*http.Request, []string) {
	t.Helper()
	var seed, sigs []string
	mode := "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	signed := "content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class"
	contentLength := "66824"
	if !trailer {
		seed = []string{"4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"}
		sigs = []string{
			"ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
			"0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
			"b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
		}
	} else {
		mode = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
		signed = "content-encoding;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class;x-amz-trailer"
		seed = []string{"106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e"}
		sigs = []string{
			"b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2",
			"1c1344b170168f8e65b41376b44b20fe354e373826ccbbe2c1d40a8cae51e5c7",
			"2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992",
			"d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435", // trailer
		}
	}
	var body bytes.Buffer
	body.WriteString("10000;chunk-signature=" + sigs[0] + "\r\n")
	body.Write(bytes.Repeat([]byte{'a'}, 65536))
	body.WriteString("\r\n400;chunk-signature=" + sigs[1] + "\r\n")
	body.Write(bytes.Repeat([]byte{'a'}, 1024))
	body.WriteString("\r\n0;chunk-signature=" + sigs[2] + "\r\n")
	if trailer {
		body.WriteString("x-amz-checksum-crc32c:sOO8/Q==\r\n")
		body.WriteString("x-amz-trailer-signature:" + sigs[3] + "\r\n")
	}
	body.WriteString("\r\n")
	hdr := map[string]string{
		"X-Amz-Date":                   exampleAmzDay,
		"X-Amz-Storage-Class":          "REDUCED_REDUNDANCY",
		"X-Amz-Content-Sha256":         mode,
		"Content-Encoding":             "aws-chunked",
		"X-Amz-Decoded-Content-Length": "66560",
		"Authorization":                exampleAuthz(signed, seed[0]),
	}
	if trailer {
		hdr["X-Amz-Trailer"] = "x-amz-checksum-crc32c"
	} else {
		hdr["Content-Length"] = contentLength
		if body.Len() != 66824 {
			t.Fatalf("example body is %d bytes, want 66824", body.Len())
		}
	}
	r := newServerRequest("PUT", "/examplebucket/chunkObject.txt", "s3.amazonaws.com", &body, hdr)
	return r, sigs
}

func TestAWSExampleChunkedUpload(t *testing.T) {
	r, _ := chunkedExample(t, false)
	res, err := exampleVerifier().Verify(r)
	if err != nil {
		t.Fatal(err)
	}
	if res.PayloadMode != PayloadStreamingSigned || res.DecodedContentLength != 66560 || r.ContentLength != 66560 {
		t.Fatalf("result %+v, r.ContentLength %d", res, r.ContentLength)
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, bytes.Repeat([]byte{'a'}, 66560)) {
		t.Fatalf("decoded %d bytes", len(b))
	}
}

func TestAWSExampleChunkedUploadTrailer(t *testing.T) {
	r, _ := chunkedExample(t, true)
	res, err := exampleVerifier().Verify(r)
	if err != nil {
		t.Fatal(err)
	}
	if res.Trailer() != nil {
		t.Fatal("trailer visible before EOF")
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 66560 {
		t.Fatalf("decoded %d bytes", len(b))
	}
	if got := res.Trailer().Get("x-amz-checksum-crc32c"); got != "sOO8/Q==" {
		t.Fatalf("trailer crc32c %q", got)
	}
}
