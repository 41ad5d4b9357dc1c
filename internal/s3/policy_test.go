package s3

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// anon sends an unsigned request and returns its status and body.
func (e *env) anon(method, path, body string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.gw.URL()+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *env) putPolicy(c *s3.Client, bucket, doc string) error {
	_, err := c.PutBucketPolicy(e.ctx, &s3.PutBucketPolicyInput{Bucket: aws.String(bucket), Policy: aws.String(doc)})
	return err
}

func (e *env) put(c *s3.Client, bucket, key, body string) error {
	_, err := c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)})
	return err
}

func TestBucketPolicyRoundTrip(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("pol")
	b := aws.String("pol")
	_, err := e.c.GetBucketPolicy(e.ctx, &s3.GetBucketPolicyInput{Bucket: b})
	e.wantCode(err, "NoSuchBucketPolicy")

	doc := `{"Version":"2012-10-17","Statement":[{"Sid":"pub","Effect":"Allow","Principal":"*",` +
		`"Action":["s3:GetObject"],"Resource":"arn:aws:s3:::pol/public/*"}]}`
	if err := e.putPolicy(e.c, "pol", doc); err != nil {
		t.Fatal(err)
	}
	got, err := e.c.GetBucketPolicy(e.ctx, &s3.GetBucketPolicyInput{Bucket: b})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(got.Policy) != doc {
		t.Fatalf("policy %q, want %q", aws.ToString(got.Policy), doc)
	}
	if _, err := e.c.DeleteBucketPolicy(e.ctx, &s3.DeleteBucketPolicyInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	_, err = e.c.GetBucketPolicy(e.ctx, &s3.GetBucketPolicyInput{Bucket: b})
	e.wantCode(err, "NoSuchBucketPolicy")
	// Raw status codes, as the API reference gives them.
	if resp, _ := e.raw("PUT", "/pol?policy", []byte(doc), nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PutBucketPolicy status %d", resp.StatusCode)
	}
	if resp, _ := e.raw("DELETE", "/pol?policy", nil, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DeleteBucketPolicy status %d", resp.StatusCode)
	}
	err = e.putPolicy(e.c, "nosuch", doc)
	e.wantCode(err, "NoSuchBucket")
}

func TestBucketPolicyMalformed(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("pol")
	stmt := func(s string) string { return `{"Version":"2012-10-17","Statement":[` + s + `]}` }
	cases := map[string]string{
		"not json":         `{"Statement": [`,
		"no statement":     `{"Version":"2012-10-17"}`,
		"bad effect":       stmt(`{"Effect":"Maybe","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::pol/*"}`),
		"iam action":       stmt(`{"Effect":"Allow","Principal":"*","Action":"iam:CreateUser","Resource":"arn:aws:s3:::pol/*"}`),
		"other bucket":     stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::other/*"}`),
		"no such bucket":   stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::pox*"}`),
		"not an arn":       stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"*"}`),
		"no principal":     stmt(`{"Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:s3:::pol/*"}`),
		"service":          stmt(`{"Effect":"Allow","Principal":{"Service":"x"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::pol/*"}`),
		"condition":        stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::pol/*","Condition":{"StringSounds":{"aws:Referer":"x"}}}`),
		"not action":       stmt(`{"Effect":"Allow","Principal":"*","NotAction":"s3:GetObject","Resource":"arn:aws:s3:::pol/*"}`),
		"unknown field":    stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::pol/*","Extra":1}`),
		"bad version":      `{"Version":"2020-01-01","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::pol/*"}]}`,
		"empty action":     stmt(`{"Effect":"Allow","Principal":"*","Action":[],"Resource":"arn:aws:s3:::pol/*"}`),
		"oversized policy": stmt(`{"Sid":"` + strings.Repeat("x", 21<<10) + `","Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::pol/*"}`),
	}
	for name, doc := range cases {
		err := e.putPolicy(e.c, "pol", doc)
		if code(err) != "MalformedPolicy" {
			t.Errorf("%s: error %v, want MalformedPolicy", name, err)
		}
		if name == "condition" && !strings.Contains(err.Error(), "unknown Condition operator") {
			t.Errorf("condition: message %v does not say conditions are unsupported", err)
		}
	}
	_, err := e.c.GetBucketPolicy(e.ctx, &s3.GetBucketPolicyInput{Bucket: aws.String("pol")})
	e.wantCode(err, "NoSuchBucketPolicy")
}

func TestBucketPolicyAnonymous(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("site")
	for _, k := range []string{"public/a.txt", "public/sub/b.txt", "secret.txt"} {
		if err := e.put(e.c, "site", k, "data of "+k); err != nil {
			t.Fatal(err)
		}
	}
	// Default: nothing is open.
	if st, _ := e.anon("GET", "/site/public/a.txt", ""); st != http.StatusForbidden {
		t.Fatalf("anonymous get without policy: %d", st)
	}
	doc := `{"Statement":{"Effect":"Allow","Principal":{"AWS":"*"},"Action":["s3:Get*"],"Resource":["arn:aws:s3:::site/public/*"]}}`
	if err := e.putPolicy(e.c, "site", doc); err != nil {
		t.Fatal(err)
	}
	if st, body := e.anon("GET", "/site/public/sub/b.txt", ""); st != http.StatusOK || body != "data of public/sub/b.txt" {
		t.Fatalf("anonymous get inside the prefix: %d %q", st, body)
	}
	if st, _ := e.anon("HEAD", "/site/public/a.txt", ""); st != http.StatusOK {
		t.Fatalf("anonymous head inside the prefix: %d", st)
	}
	if st, _ := e.anon("GET", "/site/secret.txt", ""); st != http.StatusForbidden {
		t.Fatalf("anonymous get outside the prefix: %d", st)
	}
	if st, _ := e.anon("GET", "/site?list-type=2", ""); st != http.StatusForbidden {
		t.Fatalf("anonymous list not granted: %d", st)
	}
	if st, _ := e.anon("PUT", "/site/public/new.txt", "x"); st != http.StatusForbidden {
		t.Fatalf("anonymous put not granted: %d", st)
	}
	// The policy itself is never readable or writable through a grant.
	if st, _ := e.anon("GET", "/site?policy", ""); st != http.StatusForbidden {
		t.Fatalf("anonymous get policy: %d", st)
	}

	// Allow anonymous uploads into incoming/ and listing of the bucket.
	doc = `{"Version":"2012-10-17","Statement":[` +
		`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::site/public/*"},` +
		`{"Effect":"Allow","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::site/incoming/*"},` +
		`{"Effect":"Allow","Principal":"*","Action":"s3:ListBucket","Resource":"arn:aws:s3:::site"}]}`
	if err := e.putPolicy(e.c, "site", doc); err != nil {
		t.Fatal(err)
	}
	if st, body := e.anon("PUT", "/site/incoming/up.txt", "uploaded"); st != http.StatusOK {
		t.Fatalf("anonymous put allowed by policy: %d %s", st, body)
	}
	if st, _ := e.anon("PUT", "/site/public/up.txt", "x"); st != http.StatusForbidden {
		t.Fatalf("anonymous put outside incoming/: %d", st)
	}
	if st, body := e.anon("GET", "/site?list-type=2", ""); st != http.StatusOK || !strings.Contains(body, "incoming/up.txt") {
		t.Fatalf("anonymous list allowed by policy: %d %s", st, body)
	}
	if st, _ := e.anon("GET", "/site/incoming/up.txt", ""); st != http.StatusForbidden {
		t.Fatalf("anonymous get of incoming/ (only PutObject granted): %d", st)
	}
	if st, _ := e.anon("DELETE", "/site/incoming/up.txt", ""); st != http.StatusForbidden {
		t.Fatalf("anonymous delete not granted: %d", st)
	}

	// Deleting the policy restores the default: nothing anonymous.
	if _, err := e.c.DeleteBucketPolicy(e.ctx, &s3.DeleteBucketPolicyInput{Bucket: aws.String("site")}); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.anon("GET", "/site/public/a.txt", ""); st != http.StatusForbidden {
		t.Fatalf("anonymous get after policy deletion: %d", st)
	}
	if st, _ := e.anon("PUT", "/site/incoming/x.txt", "x"); st != http.StatusForbidden {
		t.Fatalf("anonymous put after policy deletion: %d", st)
	}
}

func TestBucketPolicyIdentities(t *testing.T) {
	e := startEnv(t, func(c *Config) {
		c.Identities = append(c.Identities,
			Identity{Name: "writer", Credentials: []Credential{{"AKWRITER", "writer-secret"}},
				Actions: []string{"Read:data", "Write:data", "List:data"}},
			Identity{Name: "guest", Credentials: []Credential{{"AKGUEST", "guest-secret"}}, Actions: []string{"List:other"}})
	})
	e.mkBucket("data")
	w := e.client("AKWRITER", "writer-secret")
	g := e.client("AKGUEST", "guest-secret")
	if err := e.put(w, "data", "logs/1", "one"); err != nil {
		t.Fatal(err)
	}
	if err := e.put(w, "data", "keep/1", "k"); err != nil {
		t.Fatal(err)
	}
	doc := `{"Version":"2012-10-17","Statement":[` +
		`{"Effect":"Deny","Principal":{"AWS":["writer"]},"Action":["s3:PutObject","s3:DeleteObject"],"Resource":"arn:aws:s3:::data/keep/*"},` +
		`{"Effect":"Allow","Principal":{"AWS":["AKGUEST"]},"Action":"s3:GetObject","Resource":"arn:aws:s3:::data/logs/?"},` +
		`{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::data/locked"}]}`
	if err := e.putPolicy(e.c, "data", doc); err != nil {
		t.Fatal(err)
	}
	// The Deny wins over the writer's own Write right, only under keep/.
	e.wantCode(e.put(w, "data", "keep/2", "x"), "AccessDenied")
	_, err := w.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: aws.String("data"), Key: aws.String("keep/1")})
	e.wantCode(err, "AccessDenied")
	if err := e.put(w, "data", "logs/2", "two"); err != nil {
		t.Fatalf("writer outside the denied prefix: %v", err)
	}
	// DeleteObjects checks each key.
	out, err := w.DeleteObjects(e.ctx, &s3.DeleteObjectsInput{Bucket: aws.String("data"), Delete: &types.Delete{
		Objects: []types.ObjectIdentifier{{Key: aws.String("keep/1")}, {Key: aws.String("logs/2")}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Errors) != 1 || aws.ToString(out.Errors[0].Key) != "keep/1" || aws.ToString(out.Errors[0].Code) != "AccessDenied" ||
		len(out.Deleted) != 1 || aws.ToString(out.Deleted[0].Key) != "logs/2" {
		t.Fatalf("DeleteObjects: deleted %+v, errors %+v", out.Deleted, out.Errors)
	}
	if _, err := e.c.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: aws.String("data"), Key: aws.String("keep/1")}); err != nil {
		t.Fatalf("keep/1 was deleted: %v", err)
	}
	// The Allow adds GetObject on logs/? to the guest, who has no right on data.
	if _, err := g.GetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String("logs/1")}); err != nil {
		t.Fatalf("guest get allowed by policy: %v", err)
	}
	_, err = g.GetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String("keep/1")})
	e.wantCode(err, "AccessDenied")
	_, err = g.ListObjectsV2(e.ctx, &s3.ListObjectsV2Input{Bucket: aws.String("data")})
	e.wantCode(err, "AccessDenied")
	e.wantCode(e.put(g, "data", "logs/3", "x"), "AccessDenied")
	// Deny for "*" applies to the admin too, except for repairing the policy.
	e.wantCode(e.put(e.c, "data", "locked", "x"), "AccessDenied")
	deny := `{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":["arn:aws:s3:::data","arn:aws:s3:::data/*"]}]}`
	if err := e.putPolicy(e.c, "data", deny); err != nil {
		t.Fatal(err)
	}
	_, err = e.c.ListObjectsV2(e.ctx, &s3.ListObjectsV2Input{Bucket: aws.String("data")})
	e.wantCode(err, "AccessDenied")
	_, err = e.c.GetBucketPolicy(e.ctx, &s3.GetBucketPolicyInput{Bucket: aws.String("data")})
	e.wantCode(err, "AccessDenied")
	if err := e.putPolicy(e.c, "data", doc); err != nil {
		t.Fatalf("admin repairs a deny-all policy: %v", err)
	}
	if _, err := e.c.DeleteBucketPolicy(e.ctx, &s3.DeleteBucketPolicyInput{Bucket: aws.String("data")}); err != nil {
		t.Fatalf("admin deletes the policy: %v", err)
	}
	// Without the policy the writer's rights are back to its configuration.
	if err := e.put(w, "data", "keep/2", "x"); err != nil {
		t.Fatalf("writer after policy deletion: %v", err)
	}
	_, err = g.GetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String("logs/1")})
	e.wantCode(err, "AccessDenied")
	// Only an admin manages policies.
	e.wantCode(e.putPolicy(w, "data", doc), "AccessDenied")
}

// Conditions see the request: its source address, transport, identity and
// list parameters.
func TestBucketPolicyConditions(t *testing.T) {
	e := startEnv(t, func(c *Config) {
		c.Identities = append(c.Identities,
			Identity{Name: "alice", Credentials: []Credential{{"AKALICE", "alice-secret"}}, Actions: []string{"Read:other"}})
	})
	e.mkBucket("cond")
	for _, k := range []string{"pub/a", "home/alice/1", "home/bob/1"} {
		if err := e.put(e.c, "cond", k, "data"); err != nil {
			t.Fatal(err)
		}
	}
	alice := e.client("AKALICE", "alice-secret")
	doc := `{"Version":"2012-10-17","Statement":[` +
		`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::cond/pub/*",` +
		`"Condition":{"IpAddress":{"aws:SourceIp":"127.0.0.0/8"}}},` +
		`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::cond/home/*",` +
		`"Condition":{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}},` +
		`{"Effect":"Allow","Principal":{"AWS":"alice"},"Action":"s3:ListBucket","Resource":"arn:aws:s3:::cond",` +
		`"Condition":{"StringLike":{"s3:prefix":"home/${aws:username}/*"}}}]}`
	if err := e.putPolicy(e.c, "cond", doc); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.anon("GET", "/cond/pub/a", ""); st != http.StatusOK {
		t.Fatalf("anonymous get from 127.0.0.1, allowed for 127.0.0.0/8: %d", st)
	}
	if st, _ := e.anon("GET", "/cond/home/bob/1", ""); st != http.StatusForbidden {
		t.Fatalf("anonymous get from 127.0.0.1, allowed only for 10.0.0.0/8: %d", st)
	}
	if _, err := alice.ListObjectsV2(e.ctx, &s3.ListObjectsV2Input{Bucket: aws.String("cond"), Prefix: aws.String("home/alice/")}); err != nil {
		t.Fatalf("alice lists her prefix: %v", err)
	}
	_, err := alice.ListObjectsV2(e.ctx, &s3.ListObjectsV2Input{Bucket: aws.String("cond"), Prefix: aws.String("home/bob/")})
	e.wantCode(err, "AccessDenied")
	_, err = alice.ListObjectsV2(e.ctx, &s3.ListObjectsV2Input{Bucket: aws.String("cond")})
	e.wantCode(err, "AccessDenied")

	// Deny plain HTTP for everybody: even the admin's reads stop, and the
	// admin can still replace the policy.
	deny := `{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::cond/*",` +
		`"Condition":{"Bool":{"aws:SecureTransport":"false"}}}]}`
	if err := e.putPolicy(e.c, "cond", deny); err != nil {
		t.Fatal(err)
	}
	_, err = e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("cond"), Key: aws.String("pub/a")})
	e.wantCode(err, "AccessDenied")
	if _, err := e.c.DeleteBucketPolicy(e.ctx, &s3.DeleteBucketPolicyInput{Bucket: aws.String("cond")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("cond"), Key: aws.String("pub/a")}); err != nil {
		t.Fatal(err)
	}
}

// Canned ACLs on objects: public-read lets anybody read that object (and
// no other), authenticated-read any identity; copies do not inherit them.
func TestObjectCannedACLs(t *testing.T) {
	e := startEnv(t, func(c *Config) {
		c.Identities = append(c.Identities,
			Identity{Name: "stranger", Credentials: []Credential{{"AKSTRANGER", "stranger-secret"}}, Actions: []string{"Read:elsewhere"}})
	})
	e.mkBucket("acls")
	b := aws.String("acls")
	put := func(key, acl string) {
		t.Helper()
		in := &s3.PutObjectInput{Bucket: b, Key: aws.String(key), Body: strings.NewReader("data of " + key)}
		if acl != "" {
			in.ACL = types.ObjectCannedACL(acl)
		}
		if _, err := e.c.PutObject(e.ctx, in); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
	put("open.txt", "public-read")
	put("closed.txt", "")
	put("members.txt", "authenticated-read")
	if st, body := e.anon("GET", "/acls/open.txt", ""); st != http.StatusOK || body != "data of open.txt" {
		t.Fatalf("anonymous get of a public-read object: %d %q", st, body)
	}
	if st, _ := e.anon("HEAD", "/acls/open.txt", ""); st != http.StatusOK {
		t.Fatalf("anonymous head of a public-read object: %d", st)
	}
	for _, k := range []string{"closed.txt", "members.txt"} {
		if st, _ := e.anon("GET", "/acls/"+k, ""); st != http.StatusForbidden {
			t.Fatalf("anonymous get of %s: %d", k, st)
		}
	}
	if st, _ := e.anon("GET", "/acls?list-type=2", ""); st != http.StatusForbidden {
		t.Fatalf("an object ACL opened the bucket listing: %d", st)
	}
	stranger := e.client("AKSTRANGER", "stranger-secret")
	if _, err := stranger.GetObject(e.ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String("members.txt")}); err != nil {
		t.Fatalf("identity reading an authenticated-read object: %v", err)
	}
	_, err := stranger.GetObject(e.ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String("closed.txt")})
	e.wantCode(err, "AccessDenied")

	acl, err := e.c.GetObjectAcl(e.ctx, &s3.GetObjectAclInput{Bucket: b, Key: aws.String("open.txt")})
	if err != nil || len(acl.Grants) != 2 || acl.Grants[1].Permission != types.PermissionRead ||
		!strings.HasSuffix(aws.ToString(acl.Grants[1].Grantee.URI), "/AllUsers") {
		t.Fatalf("object ACL: %+v %v", acl, err)
	}
	// PutObjectAcl closes it again; a copy starts private.
	if _, err := e.c.PutObjectAcl(e.ctx, &s3.PutObjectAclInput{Bucket: b, Key: aws.String("open.txt"), ACL: types.ObjectCannedACLPrivate}); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.anon("GET", "/acls/open.txt", ""); st != http.StatusForbidden {
		t.Fatalf("anonymous get after PutObjectAcl private: %d", st)
	}
	if _, err := e.c.PutObjectAcl(e.ctx, &s3.PutObjectAclInput{Bucket: b, Key: aws.String("open.txt"), ACL: types.ObjectCannedACLPublicRead}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String("copy.txt"), CopySource: aws.String("acls/open.txt")}); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.anon("GET", "/acls/copy.txt", ""); st != http.StatusForbidden {
		t.Fatalf("a copy inherited the source's ACL: %d", st)
	}
	// Multipart uploads take the ACL of their creation.
	up, err := e.c.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("mp.txt"), ACL: types.ObjectCannedACLPublicRead})
	if err != nil {
		t.Fatal(err)
	}
	part, err := e.c.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: b, Key: aws.String("mp.txt"), UploadId: up.UploadId, PartNumber: aws.Int32(1), Body: strings.NewReader("mp")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.CompleteMultipartUpload(e.ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: aws.String("mp.txt"), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: part.ETag}}}}); err != nil {
		t.Fatal(err)
	}
	if st, body := e.anon("GET", "/acls/mp.txt", ""); st != http.StatusOK || body != "mp" {
		t.Fatalf("anonymous get of a public-read multipart object: %d %q", st, body)
	}
	// Bad ACLs are refused, not ignored; grant headers work.
	resp, body := e.raw("PUT", "/acls/x.txt", []byte("x"), map[string]string{"x-amz-acl": "world-writable"})
	if resp.StatusCode != 400 || !strings.Contains(string(body), "InvalidArgument") {
		t.Fatalf("unknown canned ACL: %d %s", resp.StatusCode, body)
	}
	resp, body = e.raw("PUT", "/acls/x.txt", []byte("x"), map[string]string{"x-amz-grant-read": `uri="http://acs.amazonaws.com/groups/global/AllUsers"`})
	if resp.StatusCode != 200 {
		t.Fatalf("grant header: %d %s", resp.StatusCode, body)
	}
	if st, body := e.anon("GET", "/acls/x.txt", ""); st != http.StatusOK || body != "x" {
		t.Fatalf("anonymous get of an object granting AllUsers READ: %d %q", st, body)
	}
}

// A bucket's public-read ACL lets anybody list it, not read its objects:
// as in S3, an object whose own ACL is private answers 403 to an anonymous
// GET or HEAD, in a public-read and a public-read-write bucket alike, and
// the bucket's configuration stays the owner's.
func TestPublicReadBucketKeepsObjectsPrivate(t *testing.T) {
	e := startEnv(t, nil)
	for _, acl := range []types.BucketCannedACL{"public-read", "public-read-write"} {
		bucket := "pub-" + strings.TrimPrefix(string(acl), "public-")
		if _, err := e.c.CreateBucket(e.ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket), ACL: acl}); err != nil {
			t.Fatal(err)
		}
		for key, objACL := range map[string]types.ObjectCannedACL{"private.txt": "", "open.txt": "public-read"} {
			in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader("data of " + key)}
			if objACL != "" {
				in.ACL = objACL
			}
			if _, err := e.c.PutObject(e.ctx, in); err != nil {
				t.Fatal(err)
			}
		}
		p := "/" + bucket
		for _, c := range []struct {
			method, path string
			want         int
		}{
			{"GET", p + "/private.txt", http.StatusForbidden},
			{"HEAD", p + "/private.txt", http.StatusForbidden},
			{"GET", p + "/private.txt?versionId=null", http.StatusForbidden},
			{"GET", p + "/private.txt?tagging", http.StatusForbidden},
			{"GET", p + "/private.txt?acl", http.StatusForbidden},
			{"GET", p + "/private.txt?attributes", http.StatusForbidden},
			{"GET", p + "/open.txt", http.StatusOK},
			{"GET", p + "?list-type=2", http.StatusOK},
			{"GET", p, http.StatusOK},
			{"GET", p + "?versions", http.StatusOK},
			{"GET", p + "?uploads", http.StatusOK},
			{"HEAD", p, http.StatusOK},
			{"GET", p + "?acl", http.StatusForbidden},
			{"GET", p + "?policy", http.StatusForbidden},
			{"GET", p + "?lifecycle", http.StatusForbidden},
			{"GET", p + "?cors", http.StatusForbidden},
			{"GET", p + "?versioning", http.StatusForbidden},
		} {
			if st, body := e.anon(c.method, c.path, ""); st != c.want {
				t.Errorf("%s bucket: anonymous %s %s = %d %q, want %d", acl, c.method, c.path, st, body, c.want)
			}
		}
	}
}

// TestBucketPolicyExistingObjectTag: s3:ExistingObjectTag/KEY is the
// named object's tag, so a policy opens (or closes) objects by their tags:
// an untagged, differently tagged or missing object does not match, and a
// retag takes effect at once.
func TestBucketPolicyExistingObjectTag(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("tagged")
	b := aws.String("tagged")
	for key, tagging := range map[string]string{"pub": "security=public", "priv": "security=private", "none": ""} {
		in := &s3.PutObjectInput{Bucket: b, Key: aws.String(key), Body: strings.NewReader("data of " + key)}
		if tagging != "" {
			in.Tagging = aws.String(tagging)
		}
		if _, err := e.c.PutObject(e.ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	doc := `{"Statement":[{"Effect":"Allow","Principal":"*","Action":["s3:GetObject","s3:GetObjectTagging"],"Resource":"arn:aws:s3:::tagged/*",` +
		`"Condition":{"StringEquals":{"s3:ExistingObjectTag/security":"public"}}}]}`
	if err := e.putPolicy(e.c, "tagged", doc); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]int{"pub": http.StatusOK, "priv": http.StatusForbidden, "none": http.StatusForbidden, "missing": http.StatusForbidden} {
		if st, body := e.anon("GET", "/tagged/"+key, ""); st != want || want == http.StatusOK && body != "data of "+key {
			t.Errorf("anonymous GET %s: %d %q, want %d", key, st, body, want)
		}
	}
	if st, _ := e.anon("GET", "/tagged/pub?tagging", ""); st != http.StatusOK {
		t.Errorf("anonymous GET pub?tagging: %d", st)
	}
	if _, err := e.c.PutObjectTagging(e.ctx, &s3.PutObjectTaggingInput{Bucket: b, Key: aws.String("priv"),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("security"), Value: aws.String("public")}}}}); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.anon("GET", "/tagged/priv", ""); st != http.StatusOK {
		t.Errorf("anonymous GET priv after retagging public: %d", st)
	}
}
