package s3

import (
	"github.com/kelpfs/kelp/internal/objectapi"
)

// Authorization: who may do what on a bucket and its objects.
//
// A request is allowed, in this order, when:
//
//  1. (refused) the bucket's policy has a matching Deny for the requester
//     (the bucket owner and Admin may still put or delete the policy);
//  2. the requester holds Admin on the bucket, or the operation's action
//     scoped to it ("Read:logs"): the operator's word, whoever owns it;
//  3. the bucket does not exist and the requester holds the action at
//     all (as an owner would, step 4): it hears NoSuchBucket;
//  4. the requester owns the bucket and holds the action unscoped (for
//     the bucket's settings, Write): full control within its actions;
//  5. a bucket policy Allow names it (or "*"), unless the policy is public
//     and the bucket restricts public buckets;
//  6. ACLs, unless the bucket's object ownership is BucketOwnerEnforced:
//     for object operations, the requester owns the object (within its
//     actions) or the object's ACL grants the permission; for bucket
//     operations the bucket's ACL does. Grants to AllUsers and
//     AuthenticatedUsers count unless the bucket ignores public ACLs.
//     Grants to the owner itself do not count: an owner's rights are
//     those of step 4, bounded by its actions.
//
// Grants (ACLs and policies) need no action in the grantee's list, as in
// S3, where a grant to another account needs nothing from that account's
// root: the owner of the resource decides.

// accessQuery is one authorization question.
type accessQuery struct {
	op          string // S3 operation name (router.go), or an IAM action name without "s3:"
	action      Action // the identity action it needs
	bucket, key string
	id          *Identity // nil: anonymous
	principals  []string
	cond        objectapi.ConditionValues
	versioned   bool // a versionId is given
}

// objectFacts is what an ACL question needs of the object.
type objectFacts struct {
	owner  string // canonical id (the bucket owner's when none is stored)
	grants []objectapi.Grant
}

// authorize decides whether the request's identity (nil: anonymous) may
// perform operation op, which needs action, on bucket and key ("" for
// bucket operations), and checks x-amz-expected-bucket-owner (on a copy's
// source, x-amz-source-expected-bucket-owner).
func (s *Server) authorize(rq *request, op string, action Action, bucket, key string) error {
	id := rq.id
	if bucket == "" {
		// ListBuckets (no action) is open to every identity; it shows
		// only the buckets the identity may use.
		if id != nil && (action == "" || id.allowed(action, bucket)) {
			return nil
		}
		return errAccessDenied
	}
	a := s.loadAccess(rq, bucket)
	if op != "CreateBucket" && a.exists {
		hdr := "x-amz-expected-bucket-owner"
		if rq.r.Header.Get("x-amz-copy-source") != "" && (bucket != rq.bucket || key != rq.key) {
			hdr = "x-amz-source-expected-bucket-owner"
		}
		if want := rq.r.Header.Get(hdr); want != "" && want != a.owner {
			return errAccessDenied
		}
	}
	q := &accessQuery{op: op, action: action, bucket: bucket, key: key, id: id, principals: rq.principals(),
		versioned: key != "" && rq.q.Get("versionId") != ""}
	if a.policy != nil && a.policy.Conditional() {
		q.cond = rq.conditionValues()
		if key != "" && a.policy.UsesExistingObjectTags() {
			s.existingObjectTags(rq, bucket, key, q.cond)
		}
	}
	object := func() *objectFacts { return s.objectFacts(rq, a, bucket, key) }
	if !decide(q, a, object) {
		return errAccessDenied
	}
	return nil
}

// existingObjectTags adds the tags of the object a request names (its
// version, for the request's own object) to the condition values, as
// s3:ExistingObjectTag/KEY. An object that does not exist has none.
func (s *Server) existingObjectTags(rq *request, bucket, key string, cond objectapi.ConditionValues) {
	vid := ""
	if bucket == rq.bucket && key == rq.key {
		vid = rq.q.Get("versionId")
	}
	tags, err := s.layer.GetObjectTagging(rq.ctx, bucket, key, vid)
	if err != nil {
		return
	}
	for _, t := range tags {
		cond[objectapi.ExistingObjectTagKey(t.Key)] = []string{t.Value}
	}
}

// objectFacts loads the owner and ACL of the object a request names (its
// version, for the request's own object).
func (s *Server) objectFacts(rq *request, a *bucketAccess, bucket, key string) *objectFacts {
	vid := ""
	if bucket == rq.bucket && key == rq.key {
		vid = rq.q.Get("versionId")
	}
	o, err := s.layer.GetObject(rq.ctx, bucket, key, objectapi.GetOptions{NoBody: true, VersionID: vid})
	if err != nil {
		return nil
	}
	return a.objectFactsOf(o.Info)
}

// newBucketAccess is what authorization needs of a bucket (its policy is
// parsed apart, see loadAccess).
func newBucketAccess(b objectapi.Bucket) *bucketAccess {
	return &bucketAccess{exists: true, owner: b.Owner, ownership: b.Ownership, pab: b.PublicAccessBlock, encryption: b.Encryption, lifecycle: b.Lifecycle,
		grants: objectapi.EffectiveGrants(b.ACL, b.Grants, b.Owner, b.Owner)}
}

// objectFactsOf is what authorization needs of an object of the bucket.
func (a *bucketAccess) objectFactsOf(oi objectapi.ObjectInfo) *objectFacts {
	owner := a.objectOwner(oi.Owner)
	return &objectFacts{owner: owner, grants: objectapi.EffectiveGrants(oi.ACL, oi.Grants, owner, a.owner)}
}

// objectOwner is the owner of an object whose stored owner is stored:
// the bucket owner when none is stored (objects from before owners) and
// under BucketOwnerEnforced.
func (a *bucketAccess) objectOwner(stored string) string {
	if stored == "" || a.ownership == objectapi.OwnershipBucketOwnerEnforced {
		return a.owner
	}
	return stored
}

// decide is the rule of the package comment above; object is called only
// when an object's ACL matters, and returns nil for a missing object.
func decide(q *accessQuery, b *bucketAccess, object func() *objectFacts) bool {
	id := q.id
	if q.op == "CreateBucket" {
		return id != nil && id.allowed(ActionWrite, q.bucket)
	}
	admin := id != nil && id.operatorGranted(ActionAdmin, q.bucket)
	me := ""
	if id != nil {
		me = id.CanonicalID
	}
	owner := b.exists && b.owner != "" && me == b.owner
	repair := (admin || owner) && (q.op == "PutBucketPolicy" || q.op == "DeleteBucketPolicy")
	if b.broken && !admin && !repair {
		return false // a policy that no longer parses: its Deny statements may matter
	}
	var allow, deny bool
	if b.policy != nil {
		pa := policyAction(q.op, q.versioned)
		if q.op == "DeleteObjects" {
			// The keys are in the body: deleteObjects checks each one
			// (allowedKey); here it is enough that some key could be.
			allow = b.policy.AllowsAction(q.principals, pa, q.cond)
		} else {
			allow, deny = b.policy.Evaluate(q.principals, pa, resourceARN(q.bucket, q.key), q.cond)
		}
		if b.pab != nil && b.pab.RestrictPublicBuckets && b.policy.IsPublic() {
			allow = false
		}
	}
	switch {
	case deny && !repair:
		return false
	case admin || id != nil && id.operatorGranted(q.action, q.bucket):
		return true
	case !b.exists:
		return id != nil && id.allowed(ownerAction(q.action), q.bucket)
	case owner && id.allowed(ownerAction(q.action), q.bucket):
		return true
	case allow && !isPolicyOp(q.op):
		return true
	case b.ownership == objectapi.OwnershipBucketOwnerEnforced:
		return false // ACLs are disabled
	}
	ignorePublic := b.pab != nil && b.pab.IgnorePublicAcls
	perm, onObject := aclPermission(q.op, q.key)
	if !onObject {
		return perm != "" && grantsAllow(b.grants, perm, id, b.owner, ignorePublic)
	}
	o := object()
	if o == nil {
		return false
	}
	if me != "" && o.owner == me && id.allowed(ownerAction(q.action), q.bucket) {
		return true
	}
	return perm != "" && grantsAllow(o.grants, perm, id, o.owner, ignorePublic)
}

// ownerAction is the action an owner needs for an operation: on its own
// buckets an identity's Write also covers the bucket's settings (which
// need Admin of everybody else).
func ownerAction(a Action) Action {
	if a == ActionAdmin {
		return ActionWrite
	}
	return a
}

// bucketACLOps are the operations a bucket ACL permission allows;
// objectACLOps those an object ACL permission allows (S3's mapping of ACL
// permissions to operations).
var (
	bucketACLOps = map[string]string{
		"ListObjects": objectapi.PermRead, "ListObjectsV2": objectapi.PermRead, "ListObjectVersions": objectapi.PermRead,
		"ListMultipartUploads": objectapi.PermRead, "HeadBucket": objectapi.PermRead,
		"PutObject": objectapi.PermWrite, "CopyObject": objectapi.PermWrite, "PostObject": objectapi.PermWrite,
		"CreateMultipartUpload": objectapi.PermWrite, "UploadPart": objectapi.PermWrite, "UploadPartCopy": objectapi.PermWrite,
		"CompleteMultipartUpload": objectapi.PermWrite, "AbortMultipartUpload": objectapi.PermWrite,
		"ListParts": objectapi.PermWrite, "DeleteObject": objectapi.PermWrite, "DeleteObjects": objectapi.PermWrite,
		"GetBucketAcl": objectapi.PermReadACP, "PutBucketAcl": objectapi.PermWriteACP,
	}
	objectACLOps = map[string]string{
		"GetObject": objectapi.PermRead, "HeadObject": objectapi.PermRead, "GetObjectVersion": objectapi.PermRead,
		"GetObjectAttributes": objectapi.PermRead,
		"GetObjectAcl":        objectapi.PermReadACP, "PutObjectAcl": objectapi.PermWriteACP,
	}
)

// aclPermission is the ACL permission op needs and whether on the object
// (true) or the bucket. Operations no ACL permission covers (bucket
// settings, tagging, retention) answer "": only owners, operators and
// policies allow them; an object operation still lets the object's owner.
func aclPermission(op, key string) (string, bool) {
	if p, ok := bucketACLOps[op]; ok {
		return p, false
	}
	if p, ok := objectACLOps[op]; ok {
		return p, true
	}
	return "", key != ""
}

// grantsAllow reports whether an ACL grants perm (or FULL_CONTROL) to the
// requester, owner being the resource's owner (whose own grants do not
// count, see above).
func grantsAllow(grants []objectapi.Grant, perm string, id *Identity, owner string, ignorePublic bool) bool {
	for _, g := range grants {
		if g.Permission != perm && g.Permission != objectapi.PermFullControl {
			continue
		}
		switch {
		case g.Type == objectapi.GranteeCanonicalUser:
			if id != nil && g.ID == id.CanonicalID && g.ID != owner {
				return true
			}
		case ignorePublic:
		case g.URI == objectapi.GroupAllUsers:
			return true
		case g.URI == objectapi.GroupAuthenticatedUsers && id != nil:
			return true
		}
	}
	return false
}
