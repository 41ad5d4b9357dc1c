package s3

import (
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Resources with wildcards across buckets are valid in a bucket's policy
// and apply to that bucket; another bucket's resource is MalformedPolicy.
func TestPolicyWildcardResources(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("wild-pol")
	e.mustPut("wild-pol", "key1", "v")
	e.mustPut("wild-pol", "other", "v")
	anon := func(key string) int {
		resp, err := http.Get(e.gw.URL() + "/wild-pol/" + key)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		resource    string
		key1, other int
	}{
		{"arn:aws:s3:::*", 200, 200},
		{"arn:aws:s3:::*/*", 200, 200},
		{"arn:aws:s3:::wild*/key*", 200, 403},
	} {
		doc := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"` + tc.resource + `"}]}`
		if _, err := e.c.PutBucketPolicy(e.ctx, &s3.PutBucketPolicyInput{Bucket: aws.String("wild-pol"), Policy: aws.String(doc)}); err != nil {
			t.Fatalf("%s: %v", tc.resource, err)
		}
		if got1, got2 := anon("key1"), anon("other"); got1 != tc.key1 || got2 != tc.other {
			t.Errorf("%s: anonymous GETs %d %d, want %d %d", tc.resource, got1, got2, tc.key1, tc.other)
		}
	}
	doc := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::another/*"}]}`
	_, err := e.c.PutBucketPolicy(e.ctx, &s3.PutBucketPolicyInput{Bucket: aws.String("wild-pol"), Policy: aws.String(doc)})
	e.wantCode(err, "MalformedPolicy")
}
