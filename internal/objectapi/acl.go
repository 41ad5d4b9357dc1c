package objectapi

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/kelpfs/kelp/internal/filer"
)

// Access control lists (S3 ACLs) and ownership.
//
// A bucket or object is owned by an account, named by its canonical id
// (xattr s3.owner; absent on buckets made before owners existed, and on
// their objects, which belong to the bucket's owner). Its ACL is either a
// canned ACL (xattr s3.acl, absent for private) or an explicit list of
// grants (xattr s3.grants, JSON); setting one removes the other. The
// canned form is expanded into grants when read (EffectiveGrants), with
// the owner and the bucket owner of that moment.

// ACL permissions.
const (
	PermRead        = "READ"
	PermWrite       = "WRITE"
	PermReadACP     = "READ_ACP"
	PermWriteACP    = "WRITE_ACP"
	PermFullControl = "FULL_CONTROL"
)

// Grantee types, as in S3's xsi:type.
const (
	GranteeCanonicalUser = "CanonicalUser"
	GranteeGroup         = "Group"
)

// The predefined groups.
const (
	GroupAllUsers           = "http://acs.amazonaws.com/groups/global/AllUsers"
	GroupAuthenticatedUsers = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
	GroupLogDelivery        = "http://acs.amazonaws.com/groups/s3/LogDelivery"
)

// Canned ACLs that only some resources take.
const (
	ACLBucketOwnerRead        = "bucket-owner-read"
	ACLBucketOwnerFullControl = "bucket-owner-full-control"
	ACLLogDeliveryWrite       = "log-delivery-write"
)

// Grant is one entry of an ACL: a grantee (a canonical user id, or a group
// URI) and a permission. Grants by e-mail address are resolved to canonical
// ids before they are stored, as S3 does.
type Grant struct {
	Type       string `json:"type"` // GranteeCanonicalUser or GranteeGroup
	ID         string `json:"id,omitempty"`
	URI        string `json:"uri,omitempty"`
	Permission string `json:"perm"`
}

// ValidPermission reports whether p is an ACL permission.
func ValidPermission(p string) bool {
	switch p {
	case PermRead, PermWrite, PermReadACP, PermWriteACP, PermFullControl:
		return true
	}
	return false
}

// ValidGroup reports whether uri names a group S3 defines.
func ValidGroup(uri string) bool {
	return uri == GroupAllUsers || uri == GroupAuthenticatedUsers || uri == GroupLogDelivery
}

// IsPublicGrant reports whether g lets in requesters the owner does not
// name: everybody or every identity (as S3 counts them for public access
// blocks).
func IsPublicGrant(g Grant) bool {
	return g.Type == GranteeGroup && (g.URI == GroupAllUsers || g.URI == GroupAuthenticatedUsers)
}

// IsPublicCanned reports whether a canned ACL grants public access.
func IsPublicCanned(acl string) bool {
	return acl == ACLPublicRead || acl == ACLPublicReadWrite || acl == ACLAuthenticatedRead
}

// EffectiveGrants is the grant list of a resource whose stored ACL is
// canned (or private, "") or, when grants is not nil, explicit. owner is
// the resource's owner and bucketOwner its bucket's ("" for nobody: no
// grant is made to nobody).
func EffectiveGrants(canned string, grants []Grant, owner, bucketOwner string) []Grant {
	if grants != nil {
		return grants
	}
	var out []Grant
	user := func(id, perm string) {
		if id != "" {
			out = append(out, Grant{Type: GranteeCanonicalUser, ID: id, Permission: perm})
		}
	}
	group := func(uri, perm string) { out = append(out, Grant{Type: GranteeGroup, URI: uri, Permission: perm}) }
	user(owner, PermFullControl)
	switch canned {
	case ACLPublicRead:
		group(GroupAllUsers, PermRead)
	case ACLPublicReadWrite:
		group(GroupAllUsers, PermRead)
		group(GroupAllUsers, PermWrite)
	case ACLAuthenticatedRead:
		group(GroupAuthenticatedUsers, PermRead)
	case ACLBucketOwnerRead:
		if bucketOwner != owner {
			user(bucketOwner, PermRead)
		}
	case ACLBucketOwnerFullControl:
		if bucketOwner != owner {
			user(bucketOwner, PermFullControl)
		}
	case ACLLogDeliveryWrite:
		group(GroupLogDelivery, PermWrite)
		group(GroupLogDelivery, PermReadACP)
	}
	return out
}

// Access is what a write sets of an object's (or bucket's) ownership and
// ACL: the owner's canonical id ("" none), and a canned ACL or, when Grants
// is not nil, explicit grants.
type Access struct {
	Owner  string
	Canned string
	Grants []Grant
}

const (
	xaOwner  = "s3.owner"
	xaGrants = "s3.grants"
)

// setAccess records an ACL on an entry: the canned name (private is
// recorded as nothing) or the grants. The owner is set when given and
// kept otherwise.
func setAccess(e *filer.Entry, a Access) {
	if e.Xattrs == nil {
		e.Xattrs = map[string][]byte{}
	}
	if a.Owner != "" {
		e.Xattrs[xaOwner] = []byte(a.Owner)
	}
	delete(e.Xattrs, xaACL)
	delete(e.Xattrs, xaGrants)
	switch {
	case a.Grants != nil:
		b, _ := json.Marshal(a.Grants) // plain strings: cannot fail
		e.Xattrs[xaGrants] = b
	case a.Canned != "" && a.Canned != ACLPrivate:
		e.Xattrs[xaACL] = []byte(a.Canned)
	}
}

// accessOf reads what setAccess stored. Grants that do not decode (a
// damaged attribute) are read as no grant at all: fail closed.
func accessOf(e *filer.Entry) Access {
	a := Access{Owner: string(e.Xattrs[xaOwner]), Canned: ACLPrivate}
	if c := string(e.Xattrs[xaACL]); c != "" {
		a.Canned = c
	}
	if g, ok := e.Xattrs[xaGrants]; ok {
		a.Grants = []Grant{}
		json.Unmarshal(g, &a.Grants)
	}
	return a
}

// accessXattrs are the attributes of an object's access, carried from a
// multipart upload to the object it completes.
var accessXattrs = []string{xaACL, xaGrants, xaOwner}

// copyAccess copies the access attributes of from onto to.
func copyAccess(to, from *filer.Entry) {
	for _, k := range accessXattrs {
		if v := from.Xattrs[k]; len(v) > 0 {
			to.Xattrs[k] = slices.Clone(v)
		}
	}
}

// SetBucketAccess replaces a bucket's ACL (canned or grants); the owner is
// kept unless a.Owner is set.
func (l *Layer) SetBucketAccess(ctx context.Context, name string, a Access) error {
	if a.Grants == nil && a.Canned != "" && !ValidACL(a.Canned) && a.Canned != ACLLogDeliveryWrite {
		return errorf(ErrInvalidArgument, "unknown canned ACL %q", a.Canned)
	}
	return l.updateBucket(ctx, name, func(e *filer.Entry) error {
		setAccess(e, a)
		return nil
	})
}

// SetObjectAccess replaces the ACL of an object's version ("" its latest);
// the owner is kept unless a.Owner is set.
func (l *Layer) SetObjectAccess(ctx context.Context, bucket, key, vid string, a Access) error {
	if a.Grants == nil && !ValidACL(a.Canned) {
		return errorf(ErrInvalidArgument, "unknown canned ACL %q", a.Canned)
	}
	_, e, err := l.readableVersion(ctx, bucket, key, vid)
	if err != nil {
		return err
	}
	return nsErr(l.ns.ModifyEntry(ctx, e.Path, func(ne *filer.Entry) error {
		setAccess(ne, a)
		return nil
	}), key)
}
