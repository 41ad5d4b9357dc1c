package s3

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
)

// Random requests, signed so that they reach the handlers, with random
// sub-resources, headers and bodies: the gateway answers each with an S3
// error or a success, never a 500 (501 NotImplemented is an answer).
func TestRandomRequestsNeverFail500(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("junk")
	if err := e.put(e.c, "junk", "obj", "content"); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(42, 7))
	methods := []string{"GET", "PUT", "POST", "DELETE", "HEAD"}
	paths := []string{"/", "/junk", "/junk/obj", "/junk/new", "/junk/dir/", "/nobucket/x", "/junk/a%20b", "/Junk", "/junk/obj/sub"}
	subs := []string{"", "acl", "tagging", "versioning", "policy", "lifecycle", "cors", "uploads", "uploadId=zz&partNumber=1",
		"uploadId=zz", "delete", "versionId=123", "list-type=2&max-keys=-1", "list-type=2&continuation-token=%%%",
		"max-keys=abc", "partNumber=0", "versions&max-keys=1", "location", "encoding-type=bogus", "x-id=PutObject",
		"uploads&max-uploads=-5", "prefix=%FF", "start-after=%00"}
	headers := []map[string]string{
		{}, {"x-amz-copy-source": "junk/obj"}, {"x-amz-copy-source": "/"}, {"x-amz-copy-source": "%zz"},
		{"Range": "bytes=9-1"}, {"Range": "bytes=abc"}, {"x-amz-acl": "bogus"}, {"Content-MD5": "!!"},
		{"x-amz-checksum-crc32": "###"}, {"x-amz-metadata-directive": "SOMETIMES"}, {"If-Match": "*"},
		{"x-amz-tagging": "a=%zz"}, {"Content-Type": "multipart/form-data; boundary=x"},
		{"x-amz-checksum-algorithm": "MD4"}, {"x-amz-copy-source-range": "bytes=5-1", "x-amz-copy-source": "junk/obj"},
	}
	bodies := []string{"", "<", "<Delete><Object><Key></Key></Object></Delete>", "{}", "\x00\xff\xfe",
		`<LifecycleConfiguration><Rule><Status>Enabled</Status></Rule></LifecycleConfiguration>`,
		`<CompleteMultipartUpload><Part><PartNumber>x</PartNumber></Part></CompleteMultipartUpload>`,
		`{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"*","Condition":{"IpAddress":{"aws:SourceIp":"x"}}}]}`,
		strings.Repeat("a", 70000)}
	for i := range 600 {
		method, path := methods[r.IntN(len(methods))], paths[r.IntN(len(paths))]
		if sub := subs[r.IntN(len(subs))]; sub != "" {
			path += "?" + sub
		}
		hdr := headers[r.IntN(len(headers))]
		body := bodies[r.IntN(len(bodies))]
		resp, out := e.raw(method, path, []byte(body), hdr)
		if resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented {
			t.Errorf("request %d: %s %s %v (%d-byte body): %d %s", i, method, path, hdr, len(body), resp.StatusCode, truncate(out))
		}
	}
	// The stored object is untouched by all that.
	resp, out := e.raw("GET", "/junk/obj", nil, nil)
	if resp.StatusCode != 200 && resp.StatusCode != 404 {
		t.Fatalf("after the garbage: %d %s", resp.StatusCode, out)
	}
}

func truncate(b []byte) string {
	if len(b) > 300 {
		return fmt.Sprintf("%s...", b[:300])
	}
	return string(b)
}
