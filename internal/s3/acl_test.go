package s3

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/kelpfs/kelp/internal/objectapi"
	"github.com/kelpfs/kelp/internal/s3/sigv4"
)

// accounts is a gateway with two non-admin identities, each an account:
// alice and bob, with Read, Write, List and Tagging.
type accounts struct {
	*env
	alice, bob     *s3.Client
	aliceID, bobID string
}

func startAccounts(t *testing.T, mod func(*Config)) *accounts {
	e := startEnv(t, func(c *Config) {
		rw := []string{"Read", "Write", "List", "Tagging"}
		c.Identities = append(c.Identities,
			Identity{Name: "alice", Credentials: []Credential{{"AKALICE", "alice-secret"}}, Actions: rw, Email: "Alice@example.com"},
			Identity{Name: "bob", Credentials: []Credential{{"AKBOB", "bob-secret"}}, Actions: rw, DisplayName: "Bob B."})
		if mod != nil {
			mod(c)
		}
	})
	return &accounts{env: e, alice: e.client("AKALICE", "alice-secret"), bob: e.client("AKBOB", "bob-secret"),
		aliceID: defaultCanonicalID("alice"), bobID: defaultCanonicalID("bob")}
}

func (a *accounts) put(c *s3.Client, bucket, key, body string, mod func(*s3.PutObjectInput)) error {
	in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)}
	if mod != nil {
		mod(in)
	}
	_, err := c.PutObject(a.ctx, in)
	return err
}

func (a *accounts) get(c *s3.Client, bucket, key string) (string, error) {
	out, err := c.GetObject(a.ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return "", err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	return string(b), err
}

func (a *accounts) must(err error) {
	a.t.Helper()
	if err != nil {
		a.t.Fatal(err)
	}
}

// Identities are accounts: canonical ids as docs/s3.md defines them,
// ListBuckets shows the caller as Owner and the buckets it owns; a bucket
// belongs to its creator, who has full control of it, and nobody else
// gets in without a grant; Admin reaches every bucket.
func TestBucketOwnership(t *testing.T) {
	a := startAccounts(t, nil)
	if sum := sha256.Sum256([]byte("kelp:s3:identity:alice")); a.aliceID != hex.EncodeToString(sum[:]) {
		t.Fatalf("canonical id %q", a.aliceID)
	}
	b := aws.String("alice-b")
	if _, err := a.alice.CreateBucket(a.ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	a.must(a.put(a.alice, "alice-b", "k", "alice's", nil))
	// Her bucket's settings are hers, without Admin.
	if _, err := a.alice.PutBucketCors(a.ctx, &s3.PutBucketCorsInput{Bucket: b, CORSConfiguration: &types.CORSConfiguration{
		CORSRules: []types.CORSRule{{AllowedMethods: []string{"GET"}, AllowedOrigins: []string{"*"}}}}}); err != nil {
		t.Fatalf("owner's PutBucketCors: %v", err)
	}
	lb, err := a.bob.ListBuckets(a.ctx, &s3.ListBucketsInput{})
	a.must(err)
	if aws.ToString(lb.Owner.ID) != a.bobID || aws.ToString(lb.Owner.DisplayName) != "Bob B." || len(lb.Buckets) != 0 {
		t.Fatalf("bob's ListBuckets: owner %+v, %d buckets", lb.Owner, len(lb.Buckets))
	}
	lb, err = a.alice.ListBuckets(a.ctx, &s3.ListBucketsInput{})
	a.must(err)
	if aws.ToString(lb.Owner.ID) != a.aliceID || len(lb.Buckets) != 1 || aws.ToString(lb.Buckets[0].Name) != "alice-b" {
		t.Fatalf("alice's ListBuckets: %+v %v", lb.Owner, lb.Buckets)
	}
	// Bob: refused everywhere in her bucket.
	_, err = a.get(a.bob, "alice-b", "k")
	a.wantCode(err, "AccessDenied")
	a.wantCode(a.put(a.bob, "alice-b", "x", "x", nil), "AccessDenied")
	_, err = a.bob.ListObjectsV2(a.ctx, &s3.ListObjectsV2Input{Bucket: b})
	a.wantCode(err, "AccessDenied")
	_, err = a.bob.DeleteBucket(a.ctx, &s3.DeleteBucketInput{Bucket: b})
	a.wantCode(err, "AccessDenied")
	_, err = a.bob.GetBucketAcl(a.ctx, &s3.GetBucketAclInput{Bucket: b})
	a.wantCode(err, "AccessDenied")
	// A missing bucket is NoSuchBucket to an identity that could use it.
	_, err = a.bob.ListObjectsV2(a.ctx, &s3.ListObjectsV2Input{Bucket: aws.String("nowhere")})
	a.wantCode(err, "NoSuchBucket")
	// Creating it again: hers answers 200 (us-east-1), bob's BucketAlreadyExists.
	_, err = a.alice.CreateBucket(a.ctx, &s3.CreateBucketInput{Bucket: b})
	a.wantCode(err, "")
	_, err = a.bob.CreateBucket(a.ctx, &s3.CreateBucketInput{Bucket: b})
	a.wantCode(err, "BucketAlreadyExists")
	// Admin acts on every bucket.
	if _, err := a.get(a.c, "alice-b", "k"); err != nil {
		t.Fatalf("admin read of alice's object: %v", err)
	}
	// The ACL names the real owner.
	acl, err := a.alice.GetBucketAcl(a.ctx, &s3.GetBucketAclInput{Bucket: b})
	a.must(err)
	if aws.ToString(acl.Owner.ID) != a.aliceID || aws.ToString(acl.Owner.DisplayName) != "alice" || len(acl.Grants) != 1 ||
		aws.ToString(acl.Grants[0].Grantee.ID) != a.aliceID || acl.Grants[0].Permission != types.PermissionFullControl {
		t.Fatalf("bucket ACL: %+v %+v", acl.Owner, acl.Grants)
	}
	// A bucket from before owners (made by the layer directly) is
	// nobody's: alice is refused, Admin is not.
	a.must(a.gw.Layer().CreateBucket(a.ctx, "legacy", ""))
	_, err = a.alice.ListObjectsV2(a.ctx, &s3.ListObjectsV2Input{Bucket: aws.String("legacy")})
	a.wantCode(err, "AccessDenied")
	if _, err := a.c.ListObjectsV2(a.ctx, &s3.ListObjectsV2Input{Bucket: aws.String("legacy")}); err != nil {
		t.Fatal(err)
	}
	_, err = a.c.CreateBucket(a.ctx, &s3.CreateBucketInput{Bucket: aws.String("legacy")})
	a.wantCode(err, "")
	// Delete: hers to delete.
	_, err = a.alice.DeleteObject(a.ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String("k")})
	a.must(err)
	_, err = a.alice.DeleteBucket(a.ctx, &s3.DeleteBucketInput{Bucket: b})
	a.must(err)
}

// Outside us-east-1, re-creating one's own bucket is BucketAlreadyOwnedByYou.
func TestBucketAlreadyOwnedByYouOutsideUSEast1(t *testing.T) {
	a := startAccounts(t, func(c *Config) { c.Region = "eu-west-1" })
	a.must(func() error {
		_, err := a.alice.CreateBucket(a.ctx, &s3.CreateBucketInput{Bucket: aws.String("mine")})
		return err
	}())
	_, err := a.alice.CreateBucket(a.ctx, &s3.CreateBucketInput{Bucket: aws.String("mine")})
	a.wantCode(err, "BucketAlreadyOwnedByYou")
	_, err = a.bob.CreateBucket(a.ctx, &s3.CreateBucketInput{Bucket: aws.String("mine")})
	a.wantCode(err, "BucketAlreadyExists")
}

// ACL grants by id, e-mail and group, by headers and by documents, on
// buckets and objects, each enforced.
func TestACLGrants(t *testing.T) {
	a := startAccounts(t, nil)
	b := aws.String("shared")
	_, err := a.alice.CreateBucket(a.ctx, &s3.CreateBucketInput{Bucket: b})
	a.must(err)
	a.must(a.put(a.alice, "shared", "k", "data", nil))
	_, err = a.get(a.bob, "shared", "k")
	a.wantCode(err, "AccessDenied")

	// Object READ by canonical id (the acceptance check's grant).
	_, err = a.alice.PutObjectAcl(a.ctx, &s3.PutObjectAclInput{Bucket: b, Key: aws.String("k"), GrantRead: aws.String("id=" + a.bobID)})
	a.must(err)
	if got, err := a.get(a.bob, "shared", "k"); err != nil || got != "data" {
		t.Fatalf("bob after a read grant: %q %v", got, err)
	}
	// READ is not READ_ACP, nor a listing, nor a write.
	_, err = a.bob.GetObjectAcl(a.ctx, &s3.GetObjectAclInput{Bucket: b, Key: aws.String("k")})
	a.wantCode(err, "AccessDenied")
	_, err = a.bob.ListObjectsV2(a.ctx, &s3.ListObjectsV2Input{Bucket: b})
	a.wantCode(err, "AccessDenied")
	a.wantCode(a.put(a.bob, "shared", "k", "bob's", nil), "AccessDenied")
	oacl, err := a.alice.GetObjectAcl(a.ctx, &s3.GetObjectAclInput{Bucket: b, Key: aws.String("k")})
	a.must(err)
	if aws.ToString(oacl.Owner.ID) != a.aliceID || len(oacl.Grants) != 1 || aws.ToString(oacl.Grants[0].Grantee.ID) != a.bobID ||
		aws.ToString(oacl.Grants[0].Grantee.DisplayName) != "Bob B." || oacl.Grants[0].Permission != types.PermissionRead {
		t.Fatalf("object ACL: %+v %+v", oacl.Owner, oacl.Grants)
	}

	// Bucket WRITE and READ_ACP by a document, bob named by e-mail.
	_, err = a.alice.PutBucketAcl(a.ctx, &s3.PutBucketAclInput{Bucket: b, AccessControlPolicy: &types.AccessControlPolicy{
		Owner: &types.Owner{ID: aws.String(a.aliceID)},
		Grants: []types.Grant{
			{Grantee: &types.Grantee{Type: types.TypeCanonicalUser, ID: aws.String(a.aliceID)}, Permission: types.PermissionFullControl},
			{Grantee: &types.Grantee{Type: types.TypeAmazonCustomerByEmail, EmailAddress: aws.String("alice@EXAMPLE.com")}, Permission: types.PermissionRead},
			{Grantee: &types.Grantee{Type: types.TypeCanonicalUser, ID: aws.String(a.bobID)}, Permission: types.PermissionWrite},
			{Grantee: &types.Grantee{Type: types.TypeCanonicalUser, ID: aws.String(a.bobID)}, Permission: types.PermissionReadAcp},
		}}})
	a.must(err)
	a.must(a.put(a.bob, "shared", "bobs", "bob's", nil))
	if _, err := a.bob.GetBucketAcl(a.ctx, &s3.GetBucketAclInput{Bucket: b}); err != nil {
		t.Fatalf("bob's GetBucketAcl with READ_ACP: %v", err)
	}
	_, err = a.bob.PutBucketAcl(a.ctx, &s3.PutBucketAclInput{Bucket: b, ACL: types.BucketCannedACLPublicRead})
	a.wantCode(err, "AccessDenied")
	_, err = a.bob.ListObjectsV2(a.ctx, &s3.ListObjectsV2Input{Bucket: b})
	a.wantCode(err, "AccessDenied")
	// The object bob wrote is his (ObjectWriter); the bucket owner keeps
	// full control of everything in her bucket.
	oacl, err = a.bob.GetObjectAcl(a.ctx, &s3.GetObjectAclInput{Bucket: b, Key: aws.String("bobs")})
	a.must(err)
	if aws.ToString(oacl.Owner.ID) != a.bobID {
		t.Fatalf("owner of bob's object: %+v", oacl.Owner)
	}
	if got, err := a.get(a.alice, "shared", "bobs"); err != nil || got != "bob's" {
		t.Fatalf("alice reads bob's object in her bucket: %q %v", got, err)
	}
	// A copy and a multipart upload by bob are his, with their own ACLs.
	_, err = a.bob.CopyObject(a.ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String("bobcopy"), CopySource: aws.String("shared/k"),
		GrantRead: aws.String("uri=" + objectapi.GroupAllUsers)})
	a.must(err)
	up, err := a.bob.CreateMultipartUpload(a.ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("bobmp"), ACL: types.ObjectCannedACLPublicRead})
	a.must(err)
	part, err := a.bob.UploadPart(a.ctx, &s3.UploadPartInput{Bucket: b, Key: aws.String("bobmp"), UploadId: up.UploadId,
		PartNumber: aws.Int32(1), Body: strings.NewReader("mp")})
	a.must(err)
	_, err = a.bob.CompleteMultipartUpload(a.ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: aws.String("bobmp"), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: part.ETag}}}})
	a.must(err)
	for _, k := range []string{"bobcopy", "bobmp"} {
		oacl, err := a.bob.GetObjectAcl(a.ctx, &s3.GetObjectAclInput{Bucket: b, Key: aws.String(k)})
		a.must(err)
		if aws.ToString(oacl.Owner.ID) != a.bobID {
			t.Fatalf("owner of %s: %+v", k, oacl.Owner)
		}
		if st, _ := a.anon("GET", "/shared/"+k, ""); st != 200 {
			t.Fatalf("anonymous read of bob's public %s: %d", k, st)
		}
	}
	// Listings name each object's owner.
	lo, err := a.alice.ListObjectsV2(a.ctx, &s3.ListObjectsV2Input{Bucket: b, FetchOwner: aws.Bool(true)})
	a.must(err)
	owners := map[string]string{}
	for _, o := range lo.Contents {
		owners[aws.ToString(o.Key)] = aws.ToString(o.Owner.ID)
	}
	if owners["bobs"] != a.bobID || owners["bobmp"] != a.bobID || owners["k"] != a.aliceID {
		t.Fatalf("listed owners: %v", owners)
	}
	// WRITE lets bob delete (any object, as in S3).
	_, err = a.bob.DeleteObject(a.ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String("bobs")})
	a.must(err)

	// Groups: AuthenticatedUsers READ on the bucket lets bob list;
	// AllUsers READ on an object lets anybody read it.
	_, err = a.alice.PutBucketAcl(a.ctx, &s3.PutBucketAclInput{Bucket: b, GrantRead: aws.String(`uri="` + objectapi.GroupAuthenticatedUsers + `"`)})
	a.must(err)
	if _, err := a.bob.ListObjectsV2(a.ctx, &s3.ListObjectsV2Input{Bucket: b}); err != nil {
		t.Fatalf("bob lists an AuthenticatedUsers READ bucket: %v", err)
	}
	if st, _ := a.anon("GET", "/shared?list-type=2", ""); st != http.StatusForbidden {
		t.Fatalf("anonymous list of an AuthenticatedUsers bucket: %d", st)
	}
	_, err = a.alice.PutObjectAcl(a.ctx, &s3.PutObjectAclInput{Bucket: b, Key: aws.String("k"),
		GrantRead: aws.String(`uri="` + objectapi.GroupAllUsers + `", id="` + a.bobID + `"`), GrantWriteACP: aws.String("id=" + a.bobID)})
	a.must(err)
	if st, body := a.anon("GET", "/shared/k", ""); st != 200 || body != "data" {
		t.Fatalf("anonymous read of an AllUsers READ object: %d %q", st, body)
	}
	// WRITE_ACP lets bob change the object's ACL.
	_, err = a.bob.PutObjectAcl(a.ctx, &s3.PutObjectAclInput{Bucket: b, Key: aws.String("k"), ACL: types.ObjectCannedACLPrivate})
	a.must(err)
	if st, _ := a.anon("GET", "/shared/k", ""); st != http.StatusForbidden {
		t.Fatalf("anonymous read after private: %d", st)
	}
	// Grant headers on PutObject and CreateBucket; LogDelivery is stored.
	a.must(a.put(a.alice, "shared", "g", "granted", func(in *s3.PutObjectInput) {
		in.GrantRead = aws.String("emailAddress=alice@example.com, id=" + a.bobID)
	}))
	if got, err := a.get(a.bob, "shared", "g"); err != nil || got != "granted" {
		t.Fatalf("bob reads an object put with a grant header: %q %v", got, err)
	}
	_, err = a.alice.CreateBucket(a.ctx, &s3.CreateBucketInput{Bucket: aws.String("logs"), GrantWrite: aws.String("uri=" + objectapi.GroupLogDelivery),
		GrantRead: aws.String("id=" + a.bobID)})
	a.must(err)
	if _, err := a.bob.ListObjectsV2(a.ctx, &s3.ListObjectsV2Input{Bucket: aws.String("logs")}); err != nil {
		t.Fatalf("bob lists a bucket created with a read grant for him: %v", err)
	}
	lacl, err := a.alice.GetBucketAcl(a.ctx, &s3.GetBucketAclInput{Bucket: aws.String("logs")})
	a.must(err)
	if len(lacl.Grants) != 2 || aws.ToString(lacl.Grants[0].Grantee.URI) != objectapi.GroupLogDelivery && aws.ToString(lacl.Grants[1].Grantee.URI) != objectapi.GroupLogDelivery {
		t.Fatalf("logs ACL: %+v", lacl.Grants)
	}

	// Refused, never ignored.
	for _, c := range []struct {
		hdr  map[string]string
		body string
		code string
	}{
		{map[string]string{"x-amz-grant-read": "id=0000"}, "", "InvalidArgument"},
		{map[string]string{"x-amz-grant-read": "emailAddress=nobody@example.com"}, "", "UnresolvableGrantByEmailAddress"},
		{map[string]string{"x-amz-grant-read": "uri=http://example.com/group"}, "", "InvalidArgument"},
		{map[string]string{"x-amz-grant-read": "bogus"}, "", "InvalidArgument"},
		{map[string]string{"x-amz-grant-read": "id=" + a.bobID, "x-amz-acl": "private"}, "", "InvalidRequest"},
		{nil, "<AccessControlPolicy><AccessControlList><Grant><Permission>READ</Permission></Grant></AccessControlList></AccessControlPolicy>", "MalformedACLError"},
		{nil, `<AccessControlPolicy><AccessControlList><Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="CanonicalUser"><ID>` +
			a.bobID + `</ID></Grantee><Permission>EVERYTHING</Permission></Grant></AccessControlList></AccessControlPolicy>`, "MalformedACLError"},
		{nil, `<AccessControlPolicy><Owner><ID>` + a.bobID + `</ID></Owner><AccessControlList></AccessControlList></AccessControlPolicy>`, "AccessDenied"},
		{nil, "not xml", "MalformedACLError"},
		{map[string]string{"x-amz-acl": "private"}, "<AccessControlPolicy/>", "UnexpectedContent"},
		{nil, "", "MissingRequestBodyError"},
	} {
		resp, body := a.raw("PUT", "/shared/k?acl", []byte(c.body), c.hdr)
		if resp.StatusCode/100 != 4 || !strings.Contains(string(body), "<Code>"+c.code+"</Code>") {
			t.Errorf("PutObjectAcl %v %q: %d %s, want %s", c.hdr, c.body, resp.StatusCode, body, c.code)
		}
	}
}

// Object ownership controls: ObjectWriter (the default), BucketOwnerPreferred
// and BucketOwnerEnforced (ACLs disabled, the bucket owner owns every object).
func TestObjectOwnershipControls(t *testing.T) {
	a := startAccounts(t, nil)
	b := aws.String("own")
	_, err := a.alice.CreateBucket(a.ctx, &s3.CreateBucketInput{Bucket: b, GrantWrite: aws.String("id=" + a.bobID)})
	a.must(err)
	oc, err := a.alice.GetBucketOwnershipControls(a.ctx, &s3.GetBucketOwnershipControlsInput{Bucket: b})
	a.must(err)
	if len(oc.OwnershipControls.Rules) != 1 || oc.OwnershipControls.Rules[0].ObjectOwnership != types.ObjectOwnershipObjectWriter {
		t.Fatalf("default ownership: %+v", oc.OwnershipControls)
	}
	objOwner := func(key string) string {
		t.Helper()
		out, err := a.alice.GetObjectAcl(a.ctx, &s3.GetObjectAclInput{Bucket: b, Key: aws.String(key)})
		a.must(err)
		return aws.ToString(out.Owner.ID)
	}
	setOwnership := func(o types.ObjectOwnership) error {
		_, err := a.alice.PutBucketOwnershipControls(a.ctx, &s3.PutBucketOwnershipControlsInput{Bucket: b,
			OwnershipControls: &types.OwnershipControls{Rules: []types.OwnershipControlsRule{{ObjectOwnership: o}}}})
		return err
	}
	// BucketOwnerPreferred: bob's object is alice's with
	// bucket-owner-full-control, bob's otherwise.
	a.must(setOwnership(types.ObjectOwnershipBucketOwnerPreferred))
	a.must(a.put(a.bob, "own", "pref", "x", func(in *s3.PutObjectInput) { in.ACL = types.ObjectCannedACLBucketOwnerFullControl }))
	a.must(a.put(a.bob, "own", "writer", "x", func(in *s3.PutObjectInput) { in.GrantRead = aws.String("uri=" + objectapi.GroupAllUsers) }))
	if objOwner("pref") != a.aliceID || objOwner("writer") != a.bobID {
		t.Fatalf("BucketOwnerPreferred owners: %s %s", objOwner("pref"), objOwner("writer"))
	}
	if st, _ := a.anon("GET", "/own/writer", ""); st != 200 {
		t.Fatalf("anonymous read of an AllUsers object under BucketOwnerPreferred: %d", st)
	}
	// BucketOwnerEnforced needs a bucket ACL for the owner alone.
	a.wantCode(setOwnership(types.ObjectOwnershipBucketOwnerEnforced), "InvalidBucketAclWithObjectOwnership")
	_, err = a.alice.PutBucketAcl(a.ctx, &s3.PutBucketAclInput{Bucket: b, ACL: types.BucketCannedACLPrivate})
	a.must(err)
	a.must(setOwnership(types.ObjectOwnershipBucketOwnerEnforced))
	// ACLs no longer count: the AllUsers grant is dead, and setting one is refused.
	if st, _ := a.anon("GET", "/own/writer", ""); st != http.StatusForbidden {
		t.Fatalf("anonymous read under BucketOwnerEnforced: %d", st)
	}
	a.wantCode(a.put(a.alice, "own", "pub", "x", func(in *s3.PutObjectInput) { in.ACL = types.ObjectCannedACLPublicRead }), "AccessControlListNotSupported")
	_, err = a.alice.PutObjectAcl(a.ctx, &s3.PutObjectAclInput{Bucket: b, Key: aws.String("writer"), ACL: types.ObjectCannedACLPublicRead})
	a.wantCode(err, "AccessControlListNotSupported")
	_, err = a.alice.PutBucketAcl(a.ctx, &s3.PutBucketAclInput{Bucket: b, ACL: types.BucketCannedACLPublicRead})
	a.wantCode(err, "AccessControlListNotSupported")
	a.must(a.put(a.alice, "own", "bofc", "x", func(in *s3.PutObjectInput) { in.ACL = types.ObjectCannedACLBucketOwnerFullControl }))
	// The bucket owner owns every object, bob's earlier one too.
	if objOwner("writer") != a.aliceID {
		t.Fatalf("owner under BucketOwnerEnforced: %s", objOwner("writer"))
	}
	// Deleting the controls: none stored (ObjectWriter rules apply).
	_, err = a.alice.DeleteBucketOwnershipControls(a.ctx, &s3.DeleteBucketOwnershipControlsInput{Bucket: b})
	a.must(err)
	_, err = a.alice.GetBucketOwnershipControls(a.ctx, &s3.GetBucketOwnershipControlsInput{Bucket: b})
	a.wantCode(err, "OwnershipControlsNotFoundError")
	// Set at creation; an ACL that does not fit is refused.
	_, err = a.alice.CreateBucket(a.ctx, &s3.CreateBucketInput{Bucket: aws.String("enf"), ObjectOwnership: types.ObjectOwnershipBucketOwnerEnforced})
	a.must(err)
	oc, err = a.alice.GetBucketOwnershipControls(a.ctx, &s3.GetBucketOwnershipControlsInput{Bucket: aws.String("enf")})
	a.must(err)
	if oc.OwnershipControls.Rules[0].ObjectOwnership != types.ObjectOwnershipBucketOwnerEnforced {
		t.Fatalf("ownership at creation: %+v", oc.OwnershipControls.Rules)
	}
	_, err = a.alice.CreateBucket(a.ctx, &s3.CreateBucketInput{Bucket: aws.String("enf2"), ACL: types.BucketCannedACLPublicRead,
		ObjectOwnership: types.ObjectOwnershipBucketOwnerEnforced})
	a.wantCode(err, "InvalidBucketAclWithObjectOwnership")
	// Only the owner changes them.
	_, err = a.bob.PutBucketOwnershipControls(a.ctx, &s3.PutBucketOwnershipControlsInput{Bucket: b,
		OwnershipControls: &types.OwnershipControls{Rules: []types.OwnershipControlsRule{{ObjectOwnership: types.ObjectOwnershipObjectWriter}}}})
	a.wantCode(err, "AccessDenied")
}

// The public access block: each of its four settings, enforced, and the
// policy status.
func TestPublicAccessBlock(t *testing.T) {
	a := startAccounts(t, nil)
	b := aws.String("pab")
	_, err := a.alice.CreateBucket(a.ctx, &s3.CreateBucketInput{Bucket: b})
	a.must(err)
	a.must(a.put(a.alice, "pab", "open", "x", func(in *s3.PutObjectInput) { in.ACL = types.ObjectCannedACLPublicRead }))
	_, err = a.alice.GetPublicAccessBlock(a.ctx, &s3.GetPublicAccessBlockInput{Bucket: b})
	a.wantCode(err, "NoSuchPublicAccessBlockConfiguration")
	_, err = a.alice.GetBucketPolicyStatus(a.ctx, &s3.GetBucketPolicyStatusInput{Bucket: b})
	a.wantCode(err, "NoSuchBucketPolicy")
	public := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::pab/pol/*"}]}`
	fixed := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::pab/pol/*",
		"Condition":{"IpAddress":{"aws:SourceIp":"127.0.0.0/8"}}}]}`
	_, err = a.alice.PutBucketPolicy(a.ctx, &s3.PutBucketPolicyInput{Bucket: b, Policy: aws.String(public)})
	a.must(err)
	a.must(a.put(a.alice, "pab", "pol/x", "x", nil))
	ps, err := a.alice.GetBucketPolicyStatus(a.ctx, &s3.GetBucketPolicyStatusInput{Bucket: b})
	a.must(err)
	if !aws.ToBool(ps.PolicyStatus.IsPublic) {
		t.Fatal("a policy for Principal * is not public")
	}
	setPAB := func(c types.PublicAccessBlockConfiguration) {
		t.Helper()
		_, err := a.alice.PutPublicAccessBlock(a.ctx, &s3.PutPublicAccessBlockInput{Bucket: b, PublicAccessBlockConfiguration: &c})
		a.must(err)
	}
	anon := func(path string) int { st, _ := a.anon("GET", path, ""); return st }
	if anon("/pab/open") != 200 || anon("/pab/pol/x") != 200 {
		t.Fatal("public object or policy does not work before the block")
	}
	// IgnorePublicAcls: the public-read object is private again.
	setPAB(types.PublicAccessBlockConfiguration{IgnorePublicAcls: aws.Bool(true)})
	if anon("/pab/open") != http.StatusForbidden || anon("/pab/pol/x") != 200 {
		t.Fatalf("IgnorePublicAcls: %d %d", anon("/pab/open"), anon("/pab/pol/x"))
	}
	got, err := a.alice.GetPublicAccessBlock(a.ctx, &s3.GetPublicAccessBlockInput{Bucket: b})
	a.must(err)
	if c := got.PublicAccessBlockConfiguration; !aws.ToBool(c.IgnorePublicAcls) || aws.ToBool(c.BlockPublicAcls) {
		t.Fatalf("stored block: %+v", c)
	}
	// RestrictPublicBuckets: the public policy no longer lets anybody in.
	setPAB(types.PublicAccessBlockConfiguration{RestrictPublicBuckets: aws.Bool(true)})
	if anon("/pab/pol/x") != http.StatusForbidden || anon("/pab/open") != 200 {
		t.Fatalf("RestrictPublicBuckets: %d %d", anon("/pab/pol/x"), anon("/pab/open"))
	}
	// BlockPublicAcls: public ACLs are refused on PUT, PutObjectAcl, PutBucketAcl.
	setPAB(types.PublicAccessBlockConfiguration{BlockPublicAcls: aws.Bool(true)})
	a.wantCode(a.put(a.alice, "pab", "p2", "x", func(in *s3.PutObjectInput) { in.ACL = types.ObjectCannedACLPublicRead }), "AccessDenied")
	a.wantCode(a.put(a.alice, "pab", "p2", "x", func(in *s3.PutObjectInput) { in.GrantRead = aws.String("uri=" + objectapi.GroupAuthenticatedUsers) }), "AccessDenied")
	_, err = a.alice.PutBucketAcl(a.ctx, &s3.PutBucketAclInput{Bucket: b, ACL: types.BucketCannedACLPublicRead})
	a.wantCode(err, "AccessDenied")
	a.must(a.put(a.alice, "pab", "p3", "x", func(in *s3.PutObjectInput) { in.GrantRead = aws.String("id=" + a.bobID) }))
	// BlockPublicPolicy: a public policy is refused, a fixed one is not.
	setPAB(types.PublicAccessBlockConfiguration{BlockPublicPolicy: aws.Bool(true)})
	_, err = a.alice.PutBucketPolicy(a.ctx, &s3.PutBucketPolicyInput{Bucket: b, Policy: aws.String(public)})
	a.wantCode(err, "AccessDenied")
	_, err = a.alice.PutBucketPolicy(a.ctx, &s3.PutBucketPolicyInput{Bucket: b, Policy: aws.String(fixed)})
	a.must(err)
	ps, err = a.alice.GetBucketPolicyStatus(a.ctx, &s3.GetBucketPolicyStatusInput{Bucket: b})
	a.must(err)
	if aws.ToBool(ps.PolicyStatus.IsPublic) {
		t.Fatal("a policy fixed to a source address is public")
	}
	// Deleted: back to no block.
	_, err = a.alice.DeletePublicAccessBlock(a.ctx, &s3.DeletePublicAccessBlockInput{Bucket: b})
	a.must(err)
	_, err = a.alice.GetPublicAccessBlock(a.ctx, &s3.GetPublicAccessBlockInput{Bucket: b})
	a.wantCode(err, "NoSuchPublicAccessBlockConfiguration")
	a.must(a.put(a.alice, "pab", "p4", "x", func(in *s3.PutObjectInput) { in.ACL = types.ObjectCannedACLPublicRead }))
	_, err = a.bob.PutPublicAccessBlock(a.ctx, &s3.PutPublicAccessBlockInput{Bucket: b,
		PublicAccessBlockConfiguration: &types.PublicAccessBlockConfiguration{}})
	a.wantCode(err, "AccessDenied")
}

// x-amz-expected-bucket-owner on every operation, and
// x-amz-source-expected-bucket-owner on a copy's source.
func TestExpectedBucketOwner(t *testing.T) {
	a := startAccounts(t, nil)
	b := aws.String("exp")
	_, err := a.alice.CreateBucket(a.ctx, &s3.CreateBucketInput{Bucket: b})
	a.must(err)
	a.must(a.put(a.alice, "exp", "k", "x", func(in *s3.PutObjectInput) { in.ExpectedBucketOwner = aws.String(a.aliceID) }))
	a.wantCode(a.put(a.alice, "exp", "k", "x", func(in *s3.PutObjectInput) { in.ExpectedBucketOwner = aws.String(a.bobID) }), "AccessDenied")
	_, err = a.alice.ListObjectsV2(a.ctx, &s3.ListObjectsV2Input{Bucket: b, ExpectedBucketOwner: aws.String("123456789012")})
	a.wantCode(err, "AccessDenied")
	_, err = a.alice.GetObject(a.ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String("k"), ExpectedBucketOwner: aws.String(a.aliceID)})
	a.must(err)
	// Admin is held to it too.
	_, err = a.c.HeadBucket(a.ctx, &s3.HeadBucketInput{Bucket: b, ExpectedBucketOwner: aws.String(a.bobID)})
	a.wantCode(err, "Forbidden") // HEAD: no body, the SDK names the status
	_, err = a.alice.CopyObject(a.ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String("c"), CopySource: aws.String("exp/k"),
		ExpectedBucketOwner: aws.String(a.aliceID), ExpectedSourceBucketOwner: aws.String(a.aliceID)})
	a.must(err)
	_, err = a.alice.CopyObject(a.ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String("c"), CopySource: aws.String("exp/k"),
		ExpectedSourceBucketOwner: aws.String(a.bobID)})
	a.wantCode(err, "AccessDenied")
}

// The identity file's account fields: canonicalId, email, displayName,
// checked.
func TestIdentityAccountFields(t *testing.T) {
	dir := t.TempDir()
	load := func(s string) error {
		p := filepath.Join(dir, "ids.json")
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadIdentityFile(p)
		return err
	}
	id := strings.Repeat("ab", 32)
	ok := `{"identities":[{"name":"a","credentials":[{"accessKey":"K1","secretKey":"S1"}],"actions":["Read"],
		"canonicalId":"` + id + `","email":"a@example.com","displayName":"A"}]}`
	if err := load(ok); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		`{"identities":[{"name":"a","credentials":[{"accessKey":"K1","secretKey":"S1"}],"canonicalId":"ABC"}]}`,
		`{"identities":[{"name":"a","credentials":[{"accessKey":"K1","secretKey":"S1"}],"canonicalId":"` + id + `"},
		  {"name":"b","credentials":[{"accessKey":"K2","secretKey":"S2"}],"canonicalId":"` + id + `"}]}`,
		`{"identities":[{"name":"a","credentials":[{"accessKey":"K1","secretKey":"S1"}],"email":"x@y"},
		  {"name":"b","credentials":[{"accessKey":"K2","secretKey":"S2"}],"email":"X@Y"}]}`,
	} {
		if err := load(bad); err == nil {
			t.Errorf("identity file accepted: %s", bad)
		}
	}
	a := startAccounts(t, func(c *Config) {
		c.Identities = append(c.Identities, Identity{Name: "carol", Credentials: []Credential{{"AKCAROL", "carol-secret"}},
			Actions: []string{"Read"}, CanonicalID: id})
	})
	lb, err := a.client("AKCAROL", "carol-secret").ListBuckets(a.ctx, &s3.ListBucketsInput{})
	a.must(err)
	if aws.ToString(lb.Owner.ID) != id || aws.ToString(lb.Owner.DisplayName) != "carol" {
		t.Fatalf("carol's owner: %+v", lb.Owner)
	}
	// Read alone does not create buckets.
	_, err = a.client("AKCAROL", "carol-secret").CreateBucket(a.ctx, &s3.CreateBucketInput{Bucket: aws.String("carols")})
	a.wantCode(err, "AccessDenied")
	if st, _ := a.anon("GET", "/", ""); st != http.StatusForbidden {
		t.Fatalf("anonymous ListBuckets: %d", st)
	}
}

// The object lock helper asks authorize for s3:BypassGovernanceRetention:
// the bucket owner and Admin hold it, a policy can grant it, nobody else.
func TestBypassGovernancePermission(t *testing.T) {
	a := startAccounts(t, nil)
	_, err := a.alice.CreateBucket(a.ctx, &s3.CreateBucketInput{Bucket: aws.String("gov")})
	a.must(err)
	ask := func(ak string) error {
		rq := &request{r: &http.Request{Header: http.Header{}}, ctx: a.ctx, q: map[string][]string{}, bucket: "gov", key: "k",
			auth: nil, id: a.gw.lookup(ak)}
		if rq.id != nil {
			rq.auth = &sigv4.Result{AccessKey: ak}
		}
		return a.gw.authorize(rq, "BypassGovernanceRetention", ActionAdmin, "gov", "k")
	}
	if ask("AKALICE") != nil || ask(testAK) != nil {
		t.Fatal("the bucket owner or Admin may not bypass governance retention")
	}
	if ask("AKBOB") == nil {
		t.Fatal("bob may bypass governance retention in alice's bucket")
	}
	_, err = a.alice.PutBucketPolicy(a.ctx, &s3.PutBucketPolicyInput{Bucket: aws.String("gov"), Policy: aws.String(
		`{"Statement":[{"Effect":"Allow","Principal":{"CanonicalUser":"` + a.bobID + `"},"Action":"s3:BypassGovernanceRetention","Resource":"arn:aws:s3:::gov/*"}]}`)})
	a.must(err)
	if err := ask("AKBOB"); err != nil {
		t.Fatalf("a policy's grant of s3:BypassGovernanceRetention: %v", err)
	}
}
