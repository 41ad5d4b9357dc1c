package objectapi

import (
	"context"
	"encoding/json"
	"errors"
	"os"

	"github.com/kelpfs/kelp/internal/filer"
)

// Object ownership controls (xattr s3.ownership of the bucket) and the
// bucket's public access block (xattr s3.pab, JSON).

// Object ownership settings.
const (
	OwnershipBucketOwnerEnforced  = "BucketOwnerEnforced"
	OwnershipBucketOwnerPreferred = "BucketOwnerPreferred"
	OwnershipObjectWriter         = "ObjectWriter"
)

// ValidOwnership reports whether s is an object ownership setting.
func ValidOwnership(s string) bool {
	return s == OwnershipBucketOwnerEnforced || s == OwnershipBucketOwnerPreferred || s == OwnershipObjectWriter
}

// PublicAccessBlock is a bucket's public access block configuration.
type PublicAccessBlock struct {
	BlockPublicAcls       bool `json:"blockPublicAcls,omitempty"`
	IgnorePublicAcls      bool `json:"ignorePublicAcls,omitempty"`
	BlockPublicPolicy     bool `json:"blockPublicPolicy,omitempty"`
	RestrictPublicBuckets bool `json:"restrictPublicBuckets,omitempty"`
}

const (
	xaOwnership = "s3.ownership"
	xaPAB       = "s3.pab"
)

// NewBucket describes a bucket CreateOwnedBucket makes.
type NewBucket struct {
	Access           // owner ("" none) and ACL
	Ownership string // "" none stored (ObjectWriter rules apply)
}

// CreateOwnedBucket makes a bucket with an owner, an ACL and an object
// ownership setting. An existing bucket is ErrBucketExists (the gateway
// decides what that means for the caller, who may own it).
func (l *Layer) CreateOwnedBucket(ctx context.Context, name string, nb NewBucket) error {
	if err := ValidBucketName(name); err != nil {
		return err
	}
	if nb.Grants == nil && nb.Canned != "" && !ValidACL(nb.Canned) && nb.Canned != ACLLogDeliveryWrite {
		return errorf(ErrInvalidArgument, "unknown canned ACL %q", nb.Canned)
	}
	if nb.Ownership != "" && !ValidOwnership(nb.Ownership) {
		return errorf(ErrInvalidArgument, "unknown object ownership %q", nb.Ownership)
	}
	e := &filer.Entry{Path: l.bucketPath(name), Mode: os.ModeDir | 0o755, Xattrs: map[string][]byte{}}
	setAccess(e, nb.Access)
	if nb.Ownership != "" {
		e.Xattrs[xaOwnership] = []byte(nb.Ownership)
	}
	err := l.ns.CreateEntry(ctx, e, filer.CreateOptions{Exclusive: true})
	if errors.Is(err, filer.ErrExists) {
		return errorf(ErrBucketExists, "%q", name)
	}
	return err
}

// readBucketAccess fills the ownership fields of b from its entry.
func readBucketAccess(e *filer.Entry, b *Bucket) {
	a := accessOf(e)
	b.Owner, b.ACL, b.Grants = a.Owner, a.Canned, a.Grants
	b.Ownership = string(e.Xattrs[xaOwnership])
	if v, ok := e.Xattrs[xaPAB]; ok {
		b.PublicAccessBlock = &PublicAccessBlock{}
		if json.Unmarshal(v, b.PublicAccessBlock) != nil {
			// Damaged: block everything rather than nothing.
			*b.PublicAccessBlock = PublicAccessBlock{true, true, true, true}
		}
	}
}

// SetBucketOwnership stores (or with "" removes) a bucket's object
// ownership setting.
func (l *Layer) SetBucketOwnership(ctx context.Context, name, ownership string) error {
	if ownership != "" && !ValidOwnership(ownership) {
		return errorf(ErrInvalidArgument, "unknown object ownership %q", ownership)
	}
	var v []byte
	if ownership != "" {
		v = []byte(ownership)
	}
	return l.setBucketXattr(ctx, name, xaOwnership, v)
}

// SetPublicAccessBlock stores (or with nil removes) a bucket's public
// access block.
func (l *Layer) SetPublicAccessBlock(ctx context.Context, name string, pab *PublicAccessBlock) error {
	var v []byte
	if pab != nil {
		v, _ = json.Marshal(pab) // booleans: cannot fail
	}
	return l.setBucketXattr(ctx, name, xaPAB, v)
}
