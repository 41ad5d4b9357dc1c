package s3

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

func TestLifecycleConfiguration(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("lcfg")
	b := aws.String("lcfg")
	_, err := e.c.GetBucketLifecycleConfiguration(e.ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: b})
	e.wantCode(err, "NoSuchLifecycleConfiguration")

	rules := []types.LifecycleRule{
		{ID: aws.String("logs"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("logs/")},
			Expiration: &types.LifecycleExpiration{Days: aws.Int32(30)}},
		{ID: aws.String("tmp"), Status: types.ExpirationStatusDisabled, Filter: &types.LifecycleRuleFilter{And: &types.LifecycleRuleAndOperator{
			Prefix: aws.String("tmp/"), Tags: []types.Tag{{Key: aws.String("temp"), Value: aws.String("yes")}}, ObjectSizeGreaterThan: aws.Int64(10)}},
			NoncurrentVersionExpiration: &types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(7), NewerNoncurrentVersions: aws.Int32(2)}},
		{ID: aws.String("uploads"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")},
			AbortIncompleteMultipartUpload: &types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(3)}},
		{ID: aws.String("date"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Tag: &types.Tag{Key: aws.String("k"), Value: aws.String("v")}},
			Expiration: &types.LifecycleExpiration{Date: aws.Time(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))}},
	}
	if _, err := e.c.PutBucketLifecycleConfiguration(e.ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: b,
		LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: rules}}); err != nil {
		t.Fatal(err)
	}
	got, err := e.c.GetBucketLifecycleConfiguration(e.ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: b})
	if err != nil || len(got.Rules) != 4 {
		t.Fatalf("get: %+v %v", got, err)
	}
	r0, r1, r2, r3 := got.Rules[0], got.Rules[1], got.Rules[2], got.Rules[3]
	if aws.ToString(r0.Filter.Prefix) != "logs/" || aws.ToInt32(r0.Expiration.Days) != 30 || r0.Status != types.ExpirationStatusEnabled ||
		r1.Status != types.ExpirationStatusDisabled || r1.Filter.And == nil || aws.ToString(r1.Filter.And.Prefix) != "tmp/" ||
		len(r1.Filter.And.Tags) != 1 || aws.ToInt64(r1.Filter.And.ObjectSizeGreaterThan) != 10 ||
		aws.ToInt32(r1.NoncurrentVersionExpiration.NoncurrentDays) != 7 || aws.ToInt32(r1.NoncurrentVersionExpiration.NewerNoncurrentVersions) != 2 ||
		aws.ToInt32(r2.AbortIncompleteMultipartUpload.DaysAfterInitiation) != 3 ||
		aws.ToString(r3.Filter.Tag.Key) != "k" || !aws.ToTime(r3.Expiration.Date).Equal(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("rules read back: %+v", got.Rules)
	}

	bad := map[string]string{
		"MalformedXML":    `<LifecycleConfiguration><Rule><ID>x</ID><Status>On</Status><Expiration><Days>1</Days></Expiration></Rule></LifecycleConfiguration>`,
		"InvalidRequest":  `<LifecycleConfiguration><Rule><ID>x</ID><Status>Enabled</Status><Filter><Prefix>a</Prefix></Filter></Rule></LifecycleConfiguration>`,
		"InvalidArgument": `<LifecycleConfiguration><Rule><ID>x</ID><Status>Enabled</Status><Expiration><Date>2030-01-01T10:00:00Z</Date></Expiration></Rule></LifecycleConfiguration>`,
		"NotImplemented":  `<LifecycleConfiguration><Rule><ID>x</ID><Status>Enabled</Status><Transition><Days>1</Days><StorageClass>GLACIER</StorageClass></Transition></Rule></LifecycleConfiguration>`,
	}
	for code, doc := range bad {
		resp, body := e.raw("PUT", "/lcfg?lifecycle", []byte(doc), nil)
		if !strings.Contains(string(body), "<Code>"+code+"</Code>") || resp.StatusCode < 400 || resp.StatusCode >= 500 && code != "NotImplemented" {
			t.Errorf("%s: %d %s", code, resp.StatusCode, body)
		}
	}
	dup := `<LifecycleConfiguration><Rule><ID>x</ID><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>` +
		`<Rule><ID>x</ID><Status>Enabled</Status><Expiration><Days>2</Days></Expiration></Rule></LifecycleConfiguration>`
	if resp, body := e.raw("PUT", "/lcfg?lifecycle", []byte(dup), nil); resp.StatusCode != 400 {
		t.Errorf("duplicate IDs: %d %s", resp.StatusCode, body)
	}

	if _, err := e.c.DeleteBucketLifecycle(e.ctx, &s3.DeleteBucketLifecycleInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	_, err = e.c.GetBucketLifecycleConfiguration(e.ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: b})
	e.wantCode(err, "NoSuchLifecycleConfiguration")
}

// The rules do what they say when their time comes, and nothing before.
func TestLifecycleApply(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("life")
	b := aws.String("life")
	for _, k := range []string{"logs/a", "logs/b", "keep/c", "tmp/tagged", "tmp/plain"} {
		if err := e.put(e.c, "life", k, "content of "+k); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.c.PutObjectTagging(e.ctx, &s3.PutObjectTaggingInput{Bucket: b, Key: aws.String("tmp/tagged"),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("temp"), Value: aws.String("yes")}}}}); err != nil {
		t.Fatal(err)
	}
	up, err := e.c.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("big/upload")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.c.PutBucketLifecycleConfiguration(e.ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: b,
		LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{
			{ID: aws.String("logs"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("logs/")},
				Expiration: &types.LifecycleExpiration{Days: aws.Int32(2)}},
			{ID: aws.String("tmp"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{And: &types.LifecycleRuleAndOperator{
				Prefix: aws.String("tmp/"), Tags: []types.Tag{{Key: aws.String("temp"), Value: aws.String("yes")}}}},
				Expiration: &types.LifecycleExpiration{Days: aws.Int32(1)}},
			{ID: aws.String("uploads"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")},
				AbortIncompleteMultipartUpload: &types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(1)}},
			{ID: aws.String("off"), Status: types.ExpirationStatusDisabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("keep/")},
				Expiration: &types.LifecycleExpiration{Days: aws.Int32(1)}},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	exists := func(k string) bool {
		_, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String(k)})
		return err == nil
	}
	// Today: nothing is due.
	if st, err := e.gw.layer.ApplyLifecycle(e.ctx, time.Now()); err != nil || st.Expired+st.UploadsAborted != 0 {
		t.Fatalf("apply now: %+v %v", st, err)
	}
	// At the second midnight after the objects were made the tagged tmp
	// object (1 day, rounded up to midnight UTC) and the upload are due,
	// the logs (2 days) not yet. Counted from the objects' own time, not
	// the clock's: from now, the answer would depend on the hour the test
	// runs at.
	head, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("tmp/tagged")})
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.gw.layer.ApplyLifecycle(e.ctx, head.LastModified.UTC().Truncate(24*time.Hour).Add(48*time.Hour))
	if err != nil || exists("tmp/tagged") || !exists("tmp/plain") || !exists("logs/a") || st.UploadsAborted != 1 {
		t.Fatalf("after two days: %+v %v", st, err)
	}
	if _, err := e.c.ListParts(e.ctx, &s3.ListPartsInput{Bucket: b, Key: aws.String("big/upload"), UploadId: up.UploadId}); err == nil {
		t.Fatal("stale upload not aborted")
	}
	st, err = e.gw.layer.ApplyLifecycle(e.ctx, time.Now().Add(4*24*time.Hour))
	if err != nil || exists("logs/a") || exists("logs/b") || !exists("keep/c") || !exists("tmp/plain") {
		t.Fatalf("after four days: %+v %v", st, err)
	}
}

// In a versioned bucket, expiry adds delete markers; noncurrent versions go
// NoncurrentDays after they were replaced, keeping the newest ones asked
// for; a delete marker left alone is removed.
func TestLifecycleVersions(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("vlife")
	b := aws.String("vlife")
	e.enableVersioning(*b, types.BucketVersioningStatusEnabled)
	for i := range 4 {
		if err := e.put(e.c, "vlife", "doc", strings.Repeat("v", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.put(e.c, "vlife", "gone", "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String("gone")}); err != nil {
		t.Fatal(err)
	}
	_, err := e.c.PutBucketLifecycleConfiguration(e.ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: b,
		LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{
			{ID: aws.String("versions"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("doc")},
				NoncurrentVersionExpiration: &types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(1), NewerNoncurrentVersions: aws.Int32(1)}},
			{ID: aws.String("markers"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("gone")},
				Expiration:                  &types.LifecycleExpiration{ExpiredObjectDeleteMarker: aws.Bool(true)},
				NoncurrentVersionExpiration: &types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(1)}},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	versions := func(key string) int {
		out, err := e.c.ListObjectVersions(e.ctx, &s3.ListObjectVersionsInput{Bucket: b, Prefix: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Versions) + len(out.DeleteMarkers)
	}
	// Two runs: the first removes gone's noncurrent version, which leaves
	// its delete marker alone for the second.
	for range 2 {
		if _, err := e.gw.layer.ApplyLifecycle(e.ctx, time.Now().Add(3*24*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	// doc: the current version and the newest noncurrent one stay.
	if n := versions("doc"); n != 2 {
		t.Fatalf("doc has %d versions, want 2", n)
	}
	g, err := e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String("doc")})
	if err != nil {
		t.Fatal(err)
	}
	g.Body.Close()
	if aws.ToInt64(g.ContentLength) != 4 {
		t.Fatalf("current version has %d bytes", aws.ToInt64(g.ContentLength))
	}
	if n := versions("gone"); n != 0 {
		t.Fatalf("gone keeps %d versions or markers", n)
	}
}

// TestExpirationHeader: PUT, GET, HEAD and copy of an object that an
// expiration rule covers say when it expires and by which rule (the
// earliest rule wins); objects no enabled rule covers (a disabled rule,
// a tag that does not match) say nothing.
func TestExpirationHeader(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("lexp")
	b := aws.String("lexp")
	rules := []types.LifecycleRule{
		{ID: aws.String("logs30"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("logs/")},
			Expiration: &types.LifecycleExpiration{Days: aws.Int32(30)}},
		{ID: aws.String("logs2"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{And: &types.LifecycleRuleAndOperator{
			Prefix: aws.String("logs/"), Tags: []types.Tag{{Key: aws.String("tmp"), Value: aws.String("1")}}}},
			Expiration: &types.LifecycleExpiration{Days: aws.Int32(2)}},
		{ID: aws.String("off"), Status: types.ExpirationStatusDisabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")},
			Expiration: &types.LifecycleExpiration{Days: aws.Int32(1)}},
		{ID: aws.String("dated"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("old/")},
			Expiration: &types.LifecycleExpiration{Date: aws.Time(time.Date(2031, 3, 1, 0, 0, 0, 0, time.UTC))}},
	}
	if _, err := e.c.PutBucketLifecycleConfiguration(e.ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: b,
		LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: rules}}); err != nil {
		t.Fatal(err)
	}
	put := func(key, tagging string) string {
		in := &s3.PutObjectInput{Bucket: b, Key: aws.String(key), Body: strings.NewReader("x")}
		if tagging != "" {
			in.Tagging = aws.String(tagging)
		}
		out, err := e.c.PutObject(e.ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.Expiration)
	}
	due := func(days int) string {
		h, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("logs/a")})
		if err != nil {
			t.Fatal(err)
		}
		d := h.LastModified.UTC().Add(time.Duration(days) * 24 * time.Hour)
		return d.Truncate(24 * time.Hour).Add(24 * time.Hour).Format("Mon, 02 Jan 2006 15:04:05 GMT")
	}
	if got := put("logs/a", ""); got != `expiry-date="`+due(30)+`", rule-id="logs30"` {
		t.Errorf("PUT logs/a: x-amz-expiration %q", got)
	}
	if got := put("logs/t", "tmp=1"); !strings.Contains(got, `rule-id="logs2"`) {
		t.Errorf("PUT logs/t (tagged, the earlier rule): %q", got)
	}
	if got := put("logs/u", "tmp=2"); !strings.Contains(got, `rule-id="logs30"`) {
		t.Errorf("PUT logs/u (tag does not match): %q", got)
	}
	if got := put("other", ""); got != "" {
		t.Errorf("PUT other (only a disabled rule): %q", got)
	}
	if got := put("old/x", ""); got != `expiry-date="Sat, 01 Mar 2031 00:00:00 GMT", rule-id="dated"` {
		t.Errorf("PUT old/x: %q", got)
	}
	h, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("logs/a")})
	if err != nil || !strings.Contains(aws.ToString(h.Expiration), `rule-id="logs30"`) {
		t.Errorf("HEAD: %q %v", aws.ToString(h.Expiration), err)
	}
	g, err := e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String("logs/t")})
	if err != nil || !strings.Contains(aws.ToString(g.Expiration), `rule-id="logs2"`) {
		t.Errorf("GET: %q %v", aws.ToString(g.Expiration), err)
	} else {
		g.Body.Close()
	}
	c, err := e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String("old/c"), CopySource: aws.String("lexp/other")})
	if err != nil || !strings.Contains(aws.ToString(c.Expiration), `rule-id="dated"`) {
		t.Errorf("copy: %q %v", aws.ToString(c.Expiration), err)
	}
	h, err = e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String("other")})
	if err != nil || h.Expiration != nil {
		t.Errorf("HEAD other: %q %v", aws.ToString(h.Expiration), err)
	}
}
