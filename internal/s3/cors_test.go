package s3

import (
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Ordinary requests with an Origin that a rule allows carry the CORS
// headers as S3 sends them, errors included; other origins get none.
func TestCORSOnOrdinaryRequests(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("corsb")
	e.mustPut("corsb", "o", "hello")
	_, err := e.c.PutBucketCors(e.ctx, &s3.PutBucketCorsInput{Bucket: aws.String("corsb"), CORSConfiguration: &types.CORSConfiguration{
		CORSRules: []types.CORSRule{{AllowedOrigins: []string{"https://*.example"}, AllowedMethods: []string{"GET", "HEAD"},
			ExposeHeaders: []string{"ETag", "x-amz-request-id"}, MaxAgeSeconds: aws.Int32(300)}}}})
	if err != nil {
		t.Fatal(err)
	}
	get := func(key, origin string, signed bool) *http.Response {
		t.Helper()
		if signed {
			resp, _ := e.raw("GET", "/corsb/"+key, nil, map[string]string{"Origin": origin})
			return resp
		}
		req, _ := http.NewRequest("GET", e.gw.URL()+"/corsb/"+key, nil)
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, tc := range []struct {
		key    string
		signed bool
		status int
	}{{"o", true, 200}, {"missing", true, 404}, {"o", false, 403}} {
		r := get(tc.key, "https://app.example", tc.signed)
		h := r.Header
		if r.StatusCode != tc.status || h.Get("Access-Control-Allow-Origin") != "https://app.example" ||
			h.Get("Access-Control-Allow-Methods") != "GET, HEAD" || h.Get("Access-Control-Expose-Headers") != "ETag, x-amz-request-id" ||
			h.Get("Access-Control-Max-Age") != "300" || h.Get("Access-Control-Allow-Credentials") != "true" ||
			!strings.Contains(h.Get("Vary"), "Origin") {
			t.Errorf("GET %s (signed %v): %d %v", tc.key, tc.signed, r.StatusCode, h)
		}
	}
	if r := get("o", "https://evil.test", true); r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("an origin no rule allows got CORS headers: %v", r.Header)
	}
}
