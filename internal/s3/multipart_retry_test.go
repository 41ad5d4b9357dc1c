package s3

import (
	"bytes"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// A completion repeated with the same parts answers as the first did; with
// other parts it finds no upload. A part uploaded twice counts once, with
// its last content.
func TestMultipartRepeatedCompletionAndPart(t *testing.T) {
	e := startEnv(t, nil)
	e.mkBucket("mpretry")
	b, k := aws.String("mpretry"), aws.String("obj")
	cr, err := e.c.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: k})
	if err != nil {
		t.Fatal(err)
	}
	first, second := randBytes(2000), randBytes(3000)
	var etags []*string
	for _, body := range [][]byte{first, second} {
		p, err := e.c.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: b, Key: k, UploadId: cr.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(body)})
		if err != nil {
			t.Fatal(err)
		}
		etags = append(etags, p.ETag)
	}
	lp, err := e.c.ListParts(e.ctx, &s3.ListPartsInput{Bucket: b, Key: k, UploadId: cr.UploadId})
	if err != nil || len(lp.Parts) != 1 || aws.ToString(lp.Parts[0].ETag) != aws.ToString(etags[1]) || aws.ToInt64(lp.Parts[0].Size) != 3000 {
		t.Fatalf("parts after a part was uploaded twice: %v %+v", err, lp)
	}
	complete := func(etag *string) (*s3.CompleteMultipartUploadOutput, error) {
		return e.c.CompleteMultipartUpload(e.ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: k, UploadId: cr.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: etag}}}})
	}
	_, err = complete(etags[0])
	e.wantCode(err, "InvalidPart")
	out1, err := complete(etags[1])
	if err != nil {
		t.Fatal(err)
	}
	out2, err := complete(etags[1])
	if err != nil {
		t.Fatalf("repeated completion: %v", err)
	}
	if aws.ToString(out1.ETag) != aws.ToString(out2.ETag) || aws.ToString(out2.Key) != "obj" || out2.VersionId != nil {
		t.Fatalf("repeated completion answered %+v, the first %+v", out2, out1)
	}
	_, err = complete(etags[0])
	e.wantCode(err, "NoSuchUpload")
	if got := e.body("mpretry", "obj"); got != string(second) {
		t.Fatalf("the object has %d bytes, want the part's last upload", len(got))
	}
}

// ListMultipartUploads and ListParts name the identity that created the
// upload, whoever lists it.
func TestMultipartInitiator(t *testing.T) {
	e := startEnv(t, func(c *Config) {
		c.Identities = append(c.Identities, Identity{Name: "alice", Credentials: []Credential{{"AKALICE", "alice-secret"}},
			Actions: []string{"Read:mpinit", "Write:mpinit", "List:mpinit"}}) // the operator's grant on the admin's bucket
	})
	e.mkBucket("mpinit")
	alice := e.client("AKALICE", "alice-secret")
	cr, err := alice.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("mpinit"), Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	want := owner{ID: defaultCanonicalID("alice"), DisplayName: "alice"}
	lu, err := e.c.ListMultipartUploads(e.ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("mpinit")})
	if err != nil || len(lu.Uploads) != 1 {
		t.Fatalf("%v %+v", err, lu)
	}
	u := lu.Uploads[0]
	if aws.ToString(u.Initiator.ID) != want.ID || aws.ToString(u.Owner.ID) != want.ID || aws.ToString(u.Initiator.DisplayName) != want.DisplayName {
		t.Fatalf("upload listed with initiator %+v owner %+v, want %+v", *u.Initiator, *u.Owner, want)
	}
	lp, err := e.c.ListParts(e.ctx, &s3.ListPartsInput{Bucket: aws.String("mpinit"), Key: aws.String("k"), UploadId: cr.UploadId})
	if err != nil || aws.ToString(lp.Initiator.ID) != want.ID || aws.ToString(lp.Owner.ID) != want.ID {
		t.Fatalf("ListParts: %v initiator %+v", err, lp.Initiator)
	}
}
