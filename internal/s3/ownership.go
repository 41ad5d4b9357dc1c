package s3

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/kelpfs/kelp/internal/objectapi"
)

// Accounts and ownership. Every identity is an account with a canonical
// id; a bucket belongs to the identity that created it and an object to
// the identity that wrote it (or to the bucket owner, by the bucket's
// object ownership setting). authz.go decides requests with it.

// defaultCanonicalID is an identity's canonical id when its file gives
// none: stable across restarts and gateways, and not guessable from
// anything but the name.
func defaultCanonicalID(name string) string {
	h := sha256.Sum256([]byte("kelp:s3:identity:" + name))
	return hex.EncodeToString(h[:])
}

// validCanonicalID reports whether s has the form of an S3 canonical user
// id: 64 lower-case hex digits.
func validCanonicalID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// addAccount fills id's account fields (canonical id, display name) and
// indexes them; two identities cannot share a canonical id or an e-mail.
func (x *identities) addAccount(id *Identity) error {
	if id.CanonicalID == "" {
		id.CanonicalID = defaultCanonicalID(id.Name)
	} else if !validCanonicalID(id.CanonicalID) {
		return fmt.Errorf("s3: identity %q: canonicalId must be 64 lower-case hex digits", id.Name)
	}
	if id.DisplayName == "" {
		id.DisplayName = id.Name
	}
	if o, dup := x.byID[id.CanonicalID]; dup {
		return fmt.Errorf("s3: identities %q and %q have the same canonical id (give each a distinct name or canonicalId)", o.Name, id.Name)
	}
	x.byID[id.CanonicalID] = id
	if id.Email != "" {
		e := strings.ToLower(id.Email)
		if o, dup := x.byEmail[e]; dup {
			return fmt.Errorf("s3: identities %q and %q have the same email", o.Name, id.Name)
		}
		x.byEmail[e] = id
	}
	return nil
}

// owner is the Owner element of S3 documents.
func (s *Server) ownerOf(canonicalID string) owner {
	if canonicalID == "" {
		return owner{}
	}
	o := owner{ID: canonicalID}
	if id := s.ids.Load().byID[canonicalID]; id != nil {
		o.DisplayName = id.DisplayName
	}
	return o
}

// myID is the requester's canonical id ("" anonymous).
func (rq *request) myID() string {
	if rq.id == nil {
		return ""
	}
	return rq.id.CanonicalID
}

// ownsOrAdmins reports whether the requester owns bucket b, or, for a
// bucket without an owner, holds Admin on it (the operator's buckets).
func (rq *request) ownsOrAdmins(b objectapi.Bucket) bool {
	if rq.id == nil {
		return false
	}
	if b.Owner == "" {
		return rq.id.operatorGranted(ActionAdmin, b.Name)
	}
	return b.Owner == rq.id.CanonicalID
}

var (
	errBucketExists        = newErr("BucketAlreadyExists", http.StatusConflict, "The requested bucket name is not available. The bucket namespace is shared by all users of the system. Please select a different name and try again.")
	errACLNotSupported     = newErr("AccessControlListNotSupported", http.StatusBadRequest, "The bucket does not allow ACLs")
	errBucketACLOwnership  = newErr("InvalidBucketAclWithObjectOwnership", http.StatusBadRequest, "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting")
	errNoOwnershipControls = newErr("OwnershipControlsNotFoundError", http.StatusNotFound, "The bucket ownership controls were not found")
	errNoPublicAccessBlock = newErr("NoSuchPublicAccessBlockConfiguration", http.StatusNotFound, "The public access block configuration was not found")
	errPublicBlocked       = newErr("AccessDenied", http.StatusForbidden, "Access Denied: the bucket's public access block forbids this")
)

// createOwnedBucket makes the bucket, owned by the requester, with the ACL and
// object ownership of the request (default ObjectWriter, so that ACLs
// work; S3's newer default is BucketOwnerEnforced). Re-creating a bucket
// one owns answers 200 and resets its ACL in us-east-1, as S3 does there,
// and BucketAlreadyOwnedByYou in other regions; somebody else's bucket is
// BucketAlreadyExists.
func (s *Server) createOwnedBucket(rq *request) error {
	ownership := rq.r.Header.Get("x-amz-object-ownership")
	if ownership != "" && !objectapi.ValidOwnership(ownership) {
		return &apiError{Code: "InvalidArgument", Status: 400, Message: "Invalid x-amz-object-ownership header: " + ownership}
	}
	acc, err := s.requestACL(rq.r.Header, true)
	if err != nil {
		return err
	}
	if ownership == objectapi.OwnershipBucketOwnerEnforced && !aclFitsEnforced(acc) {
		return errBucketACLOwnership
	}
	acc.Owner = rq.myID()
	nb := objectapi.NewBucket{Access: acc, Ownership: ownership}
	if nb.Ownership == "" {
		nb.Ownership = objectapi.OwnershipObjectWriter
	}
	err = s.layer.CreateOwnedBucket(rq.ctx, rq.bucket, nb)
	if !errors.Is(err, objectapi.ErrBucketExists) {
		return err
	}
	b, gerr := s.layer.GetBucket(rq.ctx, rq.bucket)
	switch {
	case gerr != nil:
		return err
	case !rq.ownsOrAdmins(b):
		return errBucketExists
	case s.cfg.Region != "us-east-1":
		return errBucketOwned
	}
	acc.Owner = ""
	return s.layer.SetBucketAccess(rq.ctx, rq.bucket, acc)
}

// aclFitsEnforced reports whether an ACL may be set under
// BucketOwnerEnforced: only the owner's own full control.
func aclFitsEnforced(a objectapi.Access) bool {
	if a.Grants != nil {
		return len(a.Grants) == 0
	}
	return a.Canned == "" || a.Canned == objectapi.ACLPrivate || a.Canned == objectapi.ACLBucketOwnerFullControl
}

// objectAccess decides the owner and ACL of an object a request writes
// (PUT, copy, multipart creation, form upload): the writer owns it, or
// the bucket owner does under BucketOwnerEnforced, and under
// BucketOwnerPreferred when the ACL is bucket-owner-full-control. An
// ACL the bucket's ownership setting or public access block forbids is
// refused. h holds the ACL headers (a form upload's fields).
func (s *Server) objectAccess(rq *request, h http.Header, md *objectapi.Metadata) error {
	acc, err := s.requestACL(h, false)
	if err != nil {
		return err
	}
	a := s.loadAccess(rq, rq.bucket)
	if err := a.checkNewACL(acc); err != nil {
		return err
	}
	owner := rq.myID()
	switch {
	case a.ownership == objectapi.OwnershipBucketOwnerEnforced,
		a.ownership == objectapi.OwnershipBucketOwnerPreferred && acc.Canned == objectapi.ACLBucketOwnerFullControl,
		owner == "": // anonymous writes belong to the bucket owner
		owner = a.owner
	}
	md.ACL, md.Grants, md.Owner = acc.Canned, acc.Grants, owner
	return nil
}

// checkNewACL refuses an ACL the bucket does not take: any but the
// owner's under BucketOwnerEnforced, a public one under BlockPublicAcls.
func (a *bucketAccess) checkNewACL(acc objectapi.Access) error {
	if a.ownership == objectapi.OwnershipBucketOwnerEnforced && !aclFitsEnforced(acc) {
		return errACLNotSupported
	}
	if a.pab != nil && a.pab.BlockPublicAcls && isPublicACL(acc) {
		return errPublicBlocked
	}
	return nil
}

// isPublicACL reports whether an ACL grants anything to AllUsers or
// AuthenticatedUsers.
func isPublicACL(a objectapi.Access) bool {
	if a.Grants == nil {
		return objectapi.IsPublicCanned(a.Canned)
	}
	for _, g := range a.Grants {
		if objectapi.IsPublicGrant(g) {
			return true
		}
	}
	return false
}

// objectOwnerXML is the Owner of an object of the request's bucket in
// listings.
func (s *Server) objectOwnerXML(rq *request, o objectapi.ObjectInfo) owner {
	return s.ownerOf(s.loadAccess(rq, rq.bucket).objectOwner(o.Owner))
}
