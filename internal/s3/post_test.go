package s3

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// formField is one field of a browser upload form.
type formField struct{ name, value string }

// noRedirects shows a redirect instead of following it.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// postForm sends a browser upload: the fields in order, then the file.

func (e *env) postForm(bucket string, fields []formField, filename string, content []byte) (*http.Response, []byte) {
	e.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, f := range fields {
		mw.WriteField(f.name, f.value)
	}
	fw, _ := mw.CreateFormFile("file", filename)
	fw.Write(content)
	mw.Close()
	resp, err := noRedirects.Post(e.gw.URL()+"/"+bucket, mw.FormDataContentType(), &buf)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// policyV4 returns the fields of a Signature Version 4 form for conditions
// (the credential fields' own conditions added), signed with the test key.
func policyV4(t *testing.T, expires time.Time, conditions []any, extra ...formField) []formField {
	now := time.Now().UTC()
	date, amzDate := now.Format("20060102"), now.Format("20060102T150405Z")
	cred := testAK + "/" + date + "/us-east-1/s3/aws4_request"
	conditions = append(conditions,
		map[string]string{"x-amz-algorithm": "AWS4-HMAC-SHA256"},
		map[string]string{"x-amz-credential": cred},
		map[string]string{"x-amz-date": amzDate})
	doc, _ := json.Marshal(map[string]any{"expiration": expires.UTC().Format("2006-01-02T15:04:05.000Z"), "conditions": conditions})
	policy := base64.StdEncoding.EncodeToString(doc)
	k := hmacSHA([]byte("AWS4"+testSK), date)
	for _, s := range []string{"us-east-1", "s3", "aws4_request"} {
		k = hmacSHA(k, s)
	}
	fields := append(extra,
		formField{"x-amz-algorithm", "AWS4-HMAC-SHA256"}, formField{"x-amz-credential", cred},
		formField{"x-amz-date", amzDate}, formField{"policy", policy},
		formField{"x-amz-signature", hex.EncodeToString(hmacSHA(k, policy))})
	return fields
}

func hmacSHA(key []byte, s string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

func TestPostObjectForms(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("forms")
	hour := time.Now().Add(time.Hour)
	base := []any{map[string]string{"bucket": "forms"}, []any{"starts-with", "$key", "uploads/"}}

	// Signature V4, key from the file name, metadata, 201 with a document.
	fields := policyV4(t, hour, append(base,
		[]any{"starts-with", "$Content-Type", "image/"},
		map[string]string{"success_action_status": "201"},
		[]any{"starts-with", "$x-amz-meta-owner", ""},
		[]any{"content-length-range", 1, 1 << 20}),
		formField{"key", "uploads/${filename}"}, formField{"Content-Type", "image/png"},
		formField{"success_action_status", "201"}, formField{"x-amz-meta-owner", "web"},
		formField{"x-ignore-me", "anything"})
	resp, body := e.postForm("forms", fields, `C:\photos\cat.png`, []byte("meow"))
	if resp.StatusCode != 201 || !strings.Contains(string(body), "<Key>uploads/cat.png</Key>") || resp.Header.Get("ETag") == "" {
		t.Fatalf("V4 form: %d %s", resp.StatusCode, body)
	}
	h, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: aws.String("forms"), Key: aws.String("uploads/cat.png")})
	if err != nil || aws.ToString(h.ContentType) != "image/png" || h.Metadata["owner"] != "web" || aws.ToInt64(h.ContentLength) != 4 {
		t.Fatalf("stored object: %+v %v", h, err)
	}

	// Signature V2 (AWSAccessKeyId needs no condition), default 204.
	doc, _ := json.Marshal(map[string]any{"expiration": hour.UTC().Format(time.RFC3339), "conditions": base})
	policy := base64.StdEncoding.EncodeToString(doc)
	m := hmac.New(sha1.New, []byte(testSK))
	m.Write([]byte(policy))
	resp, body = e.postForm("forms", []formField{{"key", "uploads/v2.txt"}, {"AWSAccessKeyId", testAK},
		{"policy", policy}, {"signature", base64.StdEncoding.EncodeToString(m.Sum(nil))}}, "v2.txt", []byte("two"))
	if resp.StatusCode != 204 {
		t.Fatalf("V2 form: %d %s", resp.StatusCode, body)
	}

	// A redirect after success carries bucket, key and ETag.
	fields = policyV4(t, hour, append(base, []any{"starts-with", "$success_action_redirect", "http://127.0.0.1:9/app/"}),
		formField{"key", "uploads/r"}, formField{"success_action_redirect", "http://127.0.0.1:9/app/done?x=1"})
	resp, _ = e.postForm("forms", fields, "r", []byte("r"))
	if loc := resp.Header.Get("Location"); resp.StatusCode != 303 || !strings.HasPrefix(loc, "http://127.0.0.1:9/app/done?") ||
		!strings.Contains(loc, "key=uploads%2Fr") || !strings.Contains(loc, "x=1") {
		t.Fatalf("redirect: %d %q", resp.StatusCode, loc)
	}

	refused := []struct {
		name   string
		fields []formField
		body   []byte
		status int
		code   string
	}{
		{"key outside the policy", policyV4(t, hour, base, formField{"key", "elsewhere/x"}), []byte("x"), 403, "AccessDenied"},
		{"expired", policyV4(t, time.Now().Add(-time.Minute), base, formField{"key", "uploads/x"}), []byte("x"), 403, "AccessDenied"},
		{"a field no condition covers", policyV4(t, hour, base, formField{"key", "uploads/x"}, formField{"Content-Type", "text/plain"}), []byte("x"), 403, "AccessDenied"},
		{"too large", policyV4(t, hour, append(base, []any{"content-length-range", 0, 3}), formField{"key", "uploads/big"}), []byte("four"), 400, "EntityTooLarge"},
		{"too small", policyV4(t, hour, append(base, []any{"content-length-range", 10, 20}), formField{"key", "uploads/small"}), []byte("four"), 400, "EntityTooSmall"},
		{"bad signature", func() []formField {
			f := policyV4(t, hour, base, formField{"key", "uploads/x"})
			f[len(f)-1].value = strings.Repeat("0", 64)
			return f
		}(), []byte("x"), 403, "SignatureDoesNotMatch"},
		{"no key", policyV4(t, hour, base[:1]), []byte("x"), 400, "InvalidArgument"},
		{"anonymous on a private bucket", []formField{{"key", "uploads/anon"}}, []byte("x"), 403, "AccessDenied"},
		{"malformed policy", []formField{{"key", "uploads/x"}, {"x-amz-algorithm", "AWS4-HMAC-SHA256"}, {"policy", "!!"}}, []byte("x"), 400, "InvalidArgument"},
	}
	for _, c := range refused {
		resp, body := e.postForm("forms", c.fields, "f", c.body)
		if resp.StatusCode != c.status || !strings.Contains(string(body), "<Code>"+c.code+"</Code>") {
			t.Errorf("%s: %d %s", c.name, resp.StatusCode, body)
		}
	}
	for _, k := range []string{"uploads/big", "uploads/small", "elsewhere/x", "uploads/anon"} {
		if _, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: aws.String("forms"), Key: aws.String(k)}); err == nil {
			t.Errorf("%s was stored by a refused upload", k)
		}
	}

	// A POST that is not a form is malformed, never a 500.
	resp, body = e.raw("POST", "/forms", []byte("plain"), map[string]string{"Content-Type": "text/plain"})
	if resp.StatusCode != 400 {
		t.Fatalf("plain POST: %d %s", resp.StatusCode, body)
	}
	// No file part.
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	mw.WriteField("key", "uploads/nofile")
	mw.Close()
	r2, err := http.Post(e.gw.URL()+"/forms", mw.FormDataContentType(), &buf)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != 400 {
		t.Fatalf("form without a file: %d", r2.StatusCode)
	}
}

// Anonymous form uploads are allowed where anonymous writes are: a
// public-read-write bucket.
func TestPostObjectAnonymousOnPublicBucket(t *testing.T) {
	e := startEnv(t, nil)
	if _, err := e.c.CreateBucket(e.ctx, &s3.CreateBucketInput{Bucket: aws.String("open"), ACL: "public-read-write"}); err != nil {
		t.Fatal(err)
	}
	resp, body := e.postForm("open", []formField{{"key", "anon.txt"}}, "a.txt", []byte("hello"))
	if resp.StatusCode != 204 {
		t.Fatalf("anonymous form on a public-read-write bucket: %d %s", resp.StatusCode, body)
	}
}
