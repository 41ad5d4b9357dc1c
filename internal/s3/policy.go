package s3

import (
	"io"
	"net/http"
	"strconv"

	"github.com/kelpfs/kelp/internal/objectapi"
)

// maxPolicyBody bounds what PutBucketPolicy reads; objectapi refuses
// documents over S3's 20 KiB limit with MalformedPolicy.
const maxPolicyBody = 64 << 10

func (s *Server) getBucketPolicy(rq *request) error {
	doc, err := s.layer.GetBucketPolicy(rq.ctx, rq.bucket)
	if err != nil {
		return err
	}
	h := rq.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(doc)))
	rq.w.WriteHeader(http.StatusOK)
	rq.w.Write(doc)
	return nil
}

func (s *Server) putBucketPolicy(rq *request) error {
	doc, err := io.ReadAll(io.LimitReader(rq.r.Body, maxPolicyBody+1))
	if err != nil {
		return err
	}
	if len(doc) > maxPolicyBody {
		return errPolicyTooLarge
	}
	if err := s.checkPolicyBlocked(rq, doc); err != nil {
		return err
	}
	if err := s.layer.PutBucketPolicy(rq.ctx, rq.bucket, doc); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) deleteBucketPolicy(rq *request) error {
	if err := s.layer.DeleteBucketPolicy(rq.ctx, rq.bucket); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

// policyActions names the IAM action of the operations whose name is not
// already it (the operation names of router.go are S3 API names; most
// IAM actions are "s3:" + that name).
var policyActions = map[string]string{
	"ListBuckets":                   "s3:ListAllMyBuckets",
	"HeadBucket":                    "s3:ListBucket",
	"ListObjects":                   "s3:ListBucket",
	"ListObjectsV2":                 "s3:ListBucket",
	"ListObjectVersions":            "s3:ListBucketVersions",
	"ListMultipartUploads":          "s3:ListBucketMultipartUploads",
	"ListParts":                     "s3:ListMultipartUploadParts",
	"HeadObject":                    "s3:GetObject",
	"GetObjectAttributes":           "s3:GetObjectAttributes",
	"CopyObject":                    "s3:PutObject",
	"UploadPart":                    "s3:PutObject",
	"UploadPartCopy":                "s3:PutObject",
	"CreateMultipartUpload":         "s3:PutObject",
	"CompleteMultipartUpload":       "s3:PutObject",
	"DeleteObjects":                 "s3:DeleteObject",
	"GetBucketCors":                 "s3:GetBucketCORS",
	"PutBucketCors":                 "s3:PutBucketCORS",
	"DeleteBucketCors":              "s3:PutBucketCORS",
	"DeleteBucketTagging":           "s3:PutBucketTagging",
	"GetBucketLifecycle":            "s3:GetLifecycleConfiguration",
	"PutBucketLifecycle":            "s3:PutLifecycleConfiguration",
	"DeleteBucketLifecycle":         "s3:PutLifecycleConfiguration",
	"GetBucketEncryption":           "s3:GetEncryptionConfiguration",
	"PutBucketEncryption":           "s3:PutEncryptionConfiguration",
	"DeleteBucketEncryption":        "s3:PutEncryptionConfiguration",
	"GetBucketWebsite":              "s3:GetBucketWebsite",
	"GetPublicAccessBlock":          "s3:GetBucketPublicAccessBlock",
	"PutPublicAccessBlock":          "s3:PutBucketPublicAccessBlock",
	"DeletePublicAccessBlock":       "s3:PutBucketPublicAccessBlock",
	"DeleteBucketOwnershipControls": "s3:PutBucketOwnershipControls",
	"GetObjectLockConfiguration":    "s3:GetBucketObjectLockConfiguration",
	"PutObjectLockConfiguration":    "s3:PutBucketObjectLockConfiguration",
	// Configurations Kelp does not have (bucket_absent.go).
	"GetBucketAccelerateConfiguration":            "s3:GetAccelerateConfiguration",
	"PutBucketAccelerateConfiguration":            "s3:PutAccelerateConfiguration",
	"GetBucketNotificationConfiguration":          "s3:GetBucketNotification",
	"PutBucketNotificationConfiguration":          "s3:PutBucketNotification",
	"GetBucketReplication":                        "s3:GetReplicationConfiguration",
	"DeleteBucketReplication":                     "s3:PutReplicationConfiguration",
	"GetBucketAnalyticsConfiguration":             "s3:GetAnalyticsConfiguration",
	"ListBucketAnalyticsConfigurations":           "s3:GetAnalyticsConfiguration",
	"DeleteBucketAnalyticsConfiguration":          "s3:PutAnalyticsConfiguration",
	"GetBucketInventoryConfiguration":             "s3:GetInventoryConfiguration",
	"ListBucketInventoryConfigurations":           "s3:GetInventoryConfiguration",
	"DeleteBucketInventoryConfiguration":          "s3:PutInventoryConfiguration",
	"GetBucketMetricsConfiguration":               "s3:GetMetricsConfiguration",
	"ListBucketMetricsConfigurations":             "s3:GetMetricsConfiguration",
	"DeleteBucketMetricsConfiguration":            "s3:PutMetricsConfiguration",
	"GetBucketIntelligentTieringConfiguration":    "s3:GetIntelligentTieringConfiguration",
	"ListBucketIntelligentTieringConfigurations":  "s3:GetIntelligentTieringConfiguration",
	"DeleteBucketIntelligentTieringConfiguration": "s3:PutIntelligentTieringConfiguration",
}

// policyAction is the IAM action an operation is evaluated as; reads and
// deletes of a given version are the *Version actions, as in S3.
func policyAction(op string, versioned bool) string {
	if versioned {
		switch op {
		case "GetObject", "HeadObject":
			return "s3:GetObjectVersion"
		case "DeleteObject":
			return "s3:DeleteObjectVersion"
		case "GetObjectTagging":
			return "s3:GetObjectVersionTagging"
		case "PutObjectTagging":
			return "s3:PutObjectVersionTagging"
		case "DeleteObjectTagging":
			return "s3:DeleteObjectVersionTagging"
		case "GetObjectAcl":
			return "s3:GetObjectVersionAcl"
		case "PutObjectAcl":
			return "s3:PutObjectVersionAcl"
		}
	}
	if a, ok := policyActions[op]; ok {
		return a
	}
	return "s3:" + op
}

// copySourceOp is the operation a copy is authorised as on its source.
func copySourceOp(versionID string) string {
	if versionID != "" {
		return "GetObjectVersion"
	}
	return "GetObject"
}

// isPolicyOp reports whether op manages the policy itself: only the
// bucket's identities may do that, never a grant of the policy.
func isPolicyOp(op string) bool {
	return op == "GetBucketPolicy" || op == "PutBucketPolicy" || op == "DeleteBucketPolicy"
}

// resourceARN names a bucket ("" key) or an object as policies do.
func resourceARN(bucket, key string) string {
	if key == "" {
		return "arn:aws:s3:::" + bucket
	}
	return "arn:aws:s3:::" + bucket + "/" + key
}

// bucketAccess is what authorisation needs of a bucket, read once per
// request (see authz.go).
type bucketAccess struct {
	exists    bool
	owner     string            // canonical id, "" none
	grants    []objectapi.Grant // effective ACL
	ownership string            // object ownership setting
	pab       *objectapi.PublicAccessBlock
	policy    *objectapi.Policy // nil: none
	broken    bool              // a stored policy that no longer parses
	// encryption is the bucket's stored default encryption, read here
	// with the rest so that a write does not read the bucket again.
	encryption []byte
	// lifecycle is the bucket's stored lifecycle configuration, for the
	// x-amz-expiration header of reads and writes.
	lifecycle []byte
}

// parsedPolicy is a bucket's policy document and its parse.
type parsedPolicy struct {
	doc    string
	policy *objectapi.Policy
	err    error
}

// parsedPolicy parses doc, or returns the parse of the same document kept
// from an earlier request: every request to a bucket with a policy needs
// it, and documents change rarely. One entry per bucket.
func (s *Server) parsedPolicy(bucket string, doc []byte) (*objectapi.Policy, error) {
	if v, ok := s.policies.Load(bucket); ok {
		if pp := v.(*parsedPolicy); pp.doc == string(doc) {
			return pp.policy, pp.err
		}
	}
	p, err := objectapi.ParsePolicy(bucket, doc)
	s.policies.Store(bucket, &parsedPolicy{doc: string(doc), policy: p, err: err})
	return p, err
}

func (s *Server) loadAccess(rq *request, bucket string) *bucketAccess {
	if rq.access != nil && bucket == rq.bucket {
		return rq.access
	}
	a := &bucketAccess{}
	if b, err := s.layer.GetBucket(rq.ctx, bucket); err == nil {
		a = newBucketAccess(b)
		if b.Policy != nil {
			p, err := s.parsedPolicy(bucket, b.Policy)
			if err != nil {
				// Fail closed: its Deny statements may matter.
				s.log.Error("s3: stored bucket policy does not parse; only admins may use the bucket", "bucket", bucket, "err", err)
				a.broken = true
			}
			a.policy = p
		}
	}
	if bucket == rq.bucket {
		rq.access = a
	}
	return a
}
