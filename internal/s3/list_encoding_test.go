package s3

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// encoding-type=url encodes a space as %20 (and '+' as %2B) in every
// field S3 encodes, in all four listings.
func TestListEncodingURLSpaces(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("encb")
	for _, k := range []string{"a b/c d", "a b/x+y", "a bz"} {
		e.mustPut("encb", k, "v")
	}
	if _, err := e.c.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("encb"), Key: aws.String("a b/up load")}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"?encoding-type=url&prefix=a%20b&delimiter=%20&marker=a%20a&max-keys=1",
			[]string{"<Prefix>a%20b</Prefix>", "<Delimiter>%20</Delimiter>", "<Marker>a%20a</Marker>", "<NextMarker>a%20b/c%20</NextMarker>",
				"<CommonPrefixes><Prefix>a%20b/c%20</Prefix></CommonPrefixes>"}},
		{"?encoding-type=url&prefix=a%20b&delimiter=/",
			[]string{"<Prefix>a%20b/</Prefix>", "<Key>a%20bz</Key>"}},
		{"?list-type=2&encoding-type=url&start-after=a%20a&prefix=a%20b/",
			[]string{"<StartAfter>a%20a</StartAfter>", "<Key>a%20b/c%20d</Key>", "<Key>a%20b/x%2By</Key>"}},
		{"?versions&encoding-type=url&prefix=a%20b/&key-marker=a%20a",
			[]string{"<KeyMarker>a%20a</KeyMarker>", "<Key>a%20b/c%20d</Key>", "<Prefix>a%20b/</Prefix>"}},
		{"?uploads&encoding-type=url&prefix=a%20b/",
			[]string{"<Key>a%20b/up%20load</Key>", "<Prefix>a%20b/</Prefix>"}},
		{"?list-type=2&continuation-token=&prefix=a",
			[]string{"<KeyCount>3</KeyCount>"}},
	} {
		resp, body := e.raw("GET", "/encb"+tc.query, nil, nil)
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", tc.query, resp.StatusCode, body)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(string(body), w) {
				t.Errorf("%s: no %s in %s", tc.query, w, body)
			}
		}
		if strings.Contains(tc.query, "encoding-type=url") && strings.Contains(string(body), "+") {
			t.Errorf("%s: a '+' in %s", tc.query, body)
		}
	}
}
