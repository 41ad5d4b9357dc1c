package s3

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

func TestBuckets(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("alpha")
	e.mkBucket("beta.2")
	// Re-creating one's own bucket: 200 in us-east-1, as S3 answers there
	// (other regions: TestBucketOwnershipAndACLs).
	_, err := e.c.CreateBucket(e.ctx, &s3.CreateBucketInput{Bucket: aws.String("alpha")})
	e.wantCode(err, "")
	for _, bad := range []string{"ab", "Upper", "a..b", "192.168.0.1", "bad_name"} {
		_, err := e.c.CreateBucket(e.ctx, &s3.CreateBucketInput{Bucket: aws.String(bad)})
		e.wantCode(err, "InvalidBucketName")
	}
	lb, err := e.c.ListBuckets(e.ctx, &s3.ListBucketsInput{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range lb.Buckets {
		names = append(names, aws.ToString(b.Name))
		if b.CreationDate == nil || b.CreationDate.IsZero() {
			t.Fatalf("bucket %s without creation date", aws.ToString(b.Name))
		}
	}
	if !slices.Equal(names, []string{"alpha", "beta.2"}) {
		t.Fatalf("buckets %q", names)
	}
	if _, err := e.c.HeadBucket(e.ctx, &s3.HeadBucketInput{Bucket: aws.String("alpha")}); err != nil {
		t.Fatal(err)
	}
	_, err = e.c.HeadBucket(e.ctx, &s3.HeadBucketInput{Bucket: aws.String("missing")})
	e.wantCode(err, "NotFound")
	loc, err := e.c.GetBucketLocation(e.ctx, &s3.GetBucketLocationInput{Bucket: aws.String("alpha")})
	if err != nil || loc.LocationConstraint != "" {
		t.Fatalf("location %v %v", loc, err)
	}
	_, err = e.c.ListObjectsV2(e.ctx, &s3.ListObjectsV2Input{Bucket: aws.String("missing")})
	e.wantCode(err, "NoSuchBucket")

	// Delete only when empty; an unfinished upload does not count.
	e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("alpha"), Key: aws.String("d/x"), Body: strings.NewReader("x")})
	e.c.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("alpha"), Key: aws.String("mp")})
	_, err = e.c.DeleteBucket(e.ctx, &s3.DeleteBucketInput{Bucket: aws.String("alpha")})
	e.wantCode(err, "BucketNotEmpty")
	if _, err := e.c.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: aws.String("alpha"), Key: aws.String("d/x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.DeleteBucket(e.ctx, &s3.DeleteBucketInput{Bucket: aws.String("alpha")}); err != nil {
		t.Fatalf("delete emptied bucket: %v", err)
	}
	_, err = e.c.HeadBucket(e.ctx, &s3.HeadBucketInput{Bucket: aws.String("alpha")})
	e.wantCode(err, "NotFound")
	_, err = e.c.DeleteBucket(e.ctx, &s3.DeleteBucketInput{Bucket: aws.String("alpha")})
	e.wantCode(err, "NoSuchBucket")
}

func TestVirtualHostedStyle(t *testing.T) {
	e := startEnv(t, func(c *Config) { c.Domains = []string{"s3.kelp.test"} })
	e.mkBucket("vhost")
	// The SDK puts the bucket in the host name; resolve every such name
	// to the gateway.
	addr := e.gw.Addr()
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	_, port, _ := net.SplitHostPort(addr)
	c := e.client(testAK, testSK, func(o *s3.Options) {
		o.UsePathStyle = false
		o.BaseEndpoint = aws.String("http://s3.kelp.test:" + port)
		o.HTTPClient = &http.Client{Transport: tr}
	})
	if _, err := c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("vhost"), Key: aws.String("k/v"), Body: strings.NewReader("hi")}); err != nil {
		t.Fatal(err)
	}
	out, err := e.c.ListObjectsV2(e.ctx, &s3.ListObjectsV2Input{Bucket: aws.String("vhost")})
	if err != nil || len(out.Contents) != 1 || aws.ToString(out.Contents[0].Key) != "k/v" {
		t.Fatalf("path-style listing after virtual-hosted put: %v %v", out, err)
	}
	if _, err := c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: aws.String("vhost"), Key: aws.String("k/v")}); err != nil {
		t.Fatal(err)
	}
}

func TestTaggingAndCORS(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("tags")
	b := aws.String("tags")
	_, err := e.c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("o"), Body: strings.NewReader("x"), Tagging: aws.String("a=1&b=two%20words")})
	if err != nil {
		t.Fatal(err)
	}
	h, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("o")})
	if err != nil {
		t.Fatal(err)
	}
	g, err := e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String("o")})
	if err != nil || aws.ToInt32(g.TagCount) != 2 {
		t.Fatalf("tag count %v %v (head %v)", g.TagCount, err, h)
	}
	g.Body.Close()
	tg, err := e.c.GetObjectTagging(e.ctx, &s3.GetObjectTaggingInput{Bucket: b, Key: aws.String("o")})
	if err != nil || len(tg.TagSet) != 2 || aws.ToString(tg.TagSet[1].Value) != "two words" {
		t.Fatalf("tags %v %v", tg, err)
	}
	_, err = e.c.PutObjectTagging(e.ctx, &s3.PutObjectTaggingInput{Bucket: b, Key: aws.String("o"),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}})
	if err != nil {
		t.Fatal(err)
	}
	tg, _ = e.c.GetObjectTagging(e.ctx, &s3.GetObjectTaggingInput{Bucket: b, Key: aws.String("o")})
	if len(tg.TagSet) != 1 || aws.ToString(tg.TagSet[0].Key) != "k" {
		t.Fatalf("replaced tags %v", tg.TagSet)
	}
	tooMany := make([]types.Tag, 11)
	for i := range tooMany {
		tooMany[i] = types.Tag{Key: aws.String(strings.Repeat("k", i+1)), Value: aws.String("v")}
	}
	_, err = e.c.PutObjectTagging(e.ctx, &s3.PutObjectTaggingInput{Bucket: b, Key: aws.String("o"), Tagging: &types.Tagging{TagSet: tooMany}})
	e.wantCode(err, "InvalidTag")
	if _, err := e.c.DeleteObjectTagging(e.ctx, &s3.DeleteObjectTaggingInput{Bucket: b, Key: aws.String("o")}); err != nil {
		t.Fatal(err)
	}
	tg, _ = e.c.GetObjectTagging(e.ctx, &s3.GetObjectTaggingInput{Bucket: b, Key: aws.String("o")})
	if len(tg.TagSet) != 0 {
		t.Fatalf("tags after delete %v", tg.TagSet)
	}

	_, err = e.c.GetBucketTagging(e.ctx, &s3.GetBucketTaggingInput{Bucket: b})
	e.wantCode(err, "NoSuchTagSet")
	_, err = e.c.PutBucketTagging(e.ctx, &s3.PutBucketTaggingInput{Bucket: b, Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("team"), Value: aws.String("x")}}}})
	if err != nil {
		t.Fatal(err)
	}
	bt, err := e.c.GetBucketTagging(e.ctx, &s3.GetBucketTaggingInput{Bucket: b})
	if err != nil || len(bt.TagSet) != 1 {
		t.Fatalf("bucket tags %v %v", bt, err)
	}

	// CORS: no configuration, then a rule, then preflights.
	preflight := func(origin, method, headers string) *http.Response {
		req, _ := http.NewRequest("OPTIONS", e.gw.URL()+"/tags/o", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", method)
		if headers != "" {
			req.Header.Set("Access-Control-Request-Headers", headers)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := preflight("https://app.example", "GET", ""); r.StatusCode != 403 {
		t.Fatalf("preflight without CORS: %d", r.StatusCode)
	}
	_, err = e.c.GetBucketCors(e.ctx, &s3.GetBucketCorsInput{Bucket: b})
	e.wantCode(err, "NoSuchCORSConfiguration")
	_, err = e.c.PutBucketCors(e.ctx, &s3.PutBucketCorsInput{Bucket: b, CORSConfiguration: &types.CORSConfiguration{CORSRules: []types.CORSRule{{
		AllowedOrigins: []string{"https://*.example"}, AllowedMethods: []string{"GET", "PUT"},
		AllowedHeaders: []string{"x-amz-*", "content-type"}, ExposeHeaders: []string{"ETag"}, MaxAgeSeconds: aws.Int32(600)}}}})
	if err != nil {
		t.Fatal(err)
	}
	gc, err := e.c.GetBucketCors(e.ctx, &s3.GetBucketCorsInput{Bucket: b})
	if err != nil || len(gc.CORSRules) != 1 || aws.ToInt32(gc.CORSRules[0].MaxAgeSeconds) != 600 {
		t.Fatalf("cors %v %v", gc, err)
	}
	r := preflight("https://app.example", "PUT", "X-Amz-Meta-A, Content-Type")
	if r.StatusCode != 200 || r.Header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
		!strings.Contains(r.Header.Get("Access-Control-Allow-Methods"), "PUT") || r.Header.Get("Access-Control-Max-Age") != "600" {
		t.Fatalf("allowed preflight: %d %v", r.StatusCode, r.Header)
	}
	for _, bad := range [][3]string{{"https://evil.test", "GET", ""}, {"https://app.example", "DELETE", ""}, {"https://app.example", "GET", "Authorization"}} {
		if r := preflight(bad[0], bad[1], bad[2]); r.StatusCode != 403 {
			t.Fatalf("preflight %v: %d", bad, r.StatusCode)
		}
	}
	if _, err := e.c.DeleteBucketCors(e.ctx, &s3.DeleteBucketCorsInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	if r := preflight("https://app.example", "GET", ""); r.StatusCode != 403 {
		t.Fatalf("preflight after delete: %d", r.StatusCode)
	}
}

// ListBuckets by prefix and in pages, as the current SDKs and CLI ask.
func TestListBucketsPages(t *testing.T) {
	e := startEnv(t, nil)
	for _, b := range []string{"logs-a", "logs-b", "logs-c", "media"} {
		e.mkBucket(b)
	}
	var names []string
	p := s3.NewListBucketsPaginator(e.c, &s3.ListBucketsInput{Prefix: aws.String("logs-"), MaxBuckets: aws.Int32(2)})
	pages := 0
	for p.HasMorePages() {
		page, err := p.NextPage(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, b := range page.Buckets {
			names = append(names, aws.ToString(b.Name))
		}
	}
	if !slices.Equal(names, []string{"logs-a", "logs-b", "logs-c"}) || pages != 2 {
		t.Fatalf("%d pages: %v", pages, names)
	}
	_, err := e.c.ListBuckets(e.ctx, &s3.ListBucketsInput{MaxBuckets: aws.Int32(0)})
	if err == nil {
		resp, body := e.raw("GET", "/?max-buckets=0", nil, nil)
		if resp.StatusCode != 400 {
			t.Fatalf("max-buckets=0: %d %s", resp.StatusCode, body)
		}
	}
}
