package objectapi

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/kelpfs/kelp/internal/filer"
)

// Bucket is one bucket.
type Bucket struct {
	Name    string
	Created time.Time
	ACL     string // canned ACL: "private" (default), "public-read", "public-read-write"
	Policy  []byte // bucket policy document (nil: none); ParsePolicy reads it
	// Owner is the owner's canonical id ("" for buckets made before
	// owners existed); Grants the explicit ACL (nil: ACL is canned);
	// Ownership the object ownership setting ("" none stored);
	// PublicAccessBlock nil when none is set (acl.go, ownership.go).
	Owner             string
	Grants            []Grant
	Ownership         string
	PublicAccessBlock *PublicAccessBlock
	// Encryption is the stored default encryption (nil: none);
	// DecodeBucketEncryption reads it.
	Encryption []byte
	// Lifecycle is the stored lifecycle configuration (nil: none);
	// DecodeLifecycle reads it.
	Lifecycle []byte
}

// Canned ACLs the gateway understands.
const (
	ACLPrivate           = "private"
	ACLPublicRead        = "public-read"
	ACLPublicReadWrite   = "public-read-write"
	ACLAuthenticatedRead = "authenticated-read"
)

// ValidACL reports whether acl is a canned ACL this package stores.
func ValidACL(acl string) bool {
	switch acl {
	case ACLPrivate, ACLPublicRead, ACLPublicReadWrite, ACLAuthenticatedRead, "bucket-owner-read", "bucket-owner-full-control":
		return true
	}
	return false
}

const (
	xaACL      = "s3.acl"
	xaCORS     = "s3.cors"
	xaTags     = "s3.tags"
	xaETag     = "s3.etag"
	xaChecksum = "s3.checksum"
	xaObject   = "s3.object"
	xaKey      = "s3.key"
	xaChunks   = "s3.chunks"
	xaPolicy   = "s3.policy"
)

func bucketOf(e *filer.Entry) Bucket {
	b := Bucket{Name: e.Name(), Created: e.Crtime}
	readBucketAccess(e, &b)
	if p := e.Xattrs[xaPolicy]; len(p) > 0 {
		b.Policy = slices.Clone(p)
	}
	if x := e.Xattrs[xaEncryption]; len(x) > 0 {
		b.Encryption = slices.Clone(x)
	}
	if x := e.Xattrs[xaLifecycle]; len(x) > 0 {
		b.Lifecycle = slices.Clone(x)
	}
	return b
}

// CreateBucket makes a bucket with no owner; acl "" is private. An
// existing bucket is ErrBucketExists (see CreateOwnedBucket).
func (l *Layer) CreateBucket(ctx context.Context, name, acl string) error {
	return l.CreateOwnedBucket(ctx, name, NewBucket{Access: Access{Canned: acl}})
}

// bucketEntry returns the directory of an existing bucket.
func (l *Layer) bucketEntry(ctx context.Context, name string) (*filer.Entry, error) {
	if err := bucketLookupName(name); err != nil {
		return nil, err
	}
	e, err := l.ns.FindEntry(ctx, l.bucketPath(name))
	if errors.Is(err, filer.ErrNotFound) || errors.Is(err, filer.ErrInvalidPath) || err == nil && !e.IsDir() {
		return nil, errorf(ErrNoSuchBucket, "%q", name)
	}
	return e, err
}

// GetBucket returns an existing bucket (HeadBucket).
func (l *Layer) GetBucket(ctx context.Context, name string) (Bucket, error) {
	e, err := l.bucketEntry(ctx, name)
	if err != nil {
		return Bucket{}, err
	}
	return bucketOf(e), nil
}

// ListBuckets returns every bucket in name order.
func (l *Layer) ListBuckets(ctx context.Context) ([]Bucket, error) {
	var out []Bucket
	after := ""
	for {
		es, more, err := l.ns.ListEntries(ctx, l.root, filer.ListOptions{StartAfter: after, Limit: 1000})
		if errors.Is(err, filer.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			after = e.Name()
			if e.IsDir() && bucketLookupName(e.Name()) == nil {
				out = append(out, bucketOf(e))
			}
		}
		if !more {
			return out, nil
		}
	}
}

// DeleteBucket removes an empty bucket; its unfinished multipart uploads
// are aborted. A bucket with objects is ErrBucketNotEmpty.
func (l *Layer) DeleteBucket(ctx context.Context, name string) error {
	if _, err := l.bucketEntry(ctx, name); err != nil {
		return err
	}
	es, _, err := l.ns.ListEntries(ctx, l.bucketPath(name), filer.ListOptions{Limit: 1})
	if err != nil {
		return err
	}
	if len(es) > 0 {
		return errorf(ErrBucketNotEmpty, "%q", name)
	}
	if err := l.abortAll(ctx, name); err != nil {
		return err
	}
	// Noncurrent versions and shadowed objects exist only beside an entry
	// in the bucket, which the check above found; what is left is debris
	// of an interrupted write.
	for _, dir := range []string{l.versionsDir(name), l.shadowsDir(name)} {
		if err := l.ns.DeleteEntry(ctx, dir, true); err != nil && !errors.Is(err, filer.ErrNotFound) {
			return err
		}
	}
	err = l.ns.DeleteEntry(ctx, l.bucketPath(name), false)
	switch {
	case errors.Is(err, filer.ErrNotEmpty):
		return errorf(ErrBucketNotEmpty, "%q", name)
	case errors.Is(err, filer.ErrNotFound):
		return errorf(ErrNoSuchBucket, "%q", name)
	}
	return err
}

// updateBucket applies fn to the bucket's directory entry and stores it,
// in one transaction (two settings changed at once both stay).
func (l *Layer) updateBucket(ctx context.Context, name string, fn func(e *filer.Entry) error) error {
	e, err := l.bucketEntry(ctx, name)
	if err != nil {
		return err
	}
	return l.ns.ModifyEntry(ctx, e.Path, fn)
}

// SetBucketACL stores a canned ACL on the bucket.
func (l *Layer) SetBucketACL(ctx context.Context, name, acl string) error {
	return l.SetBucketAccess(ctx, name, Access{Canned: acl})
}

// setBucketXattr stores (or with nil value deletes) one bucket attribute.
func (l *Layer) setBucketXattr(ctx context.Context, name, attr string, v []byte) error {
	return l.updateBucket(ctx, name, func(e *filer.Entry) error {
		if v == nil {
			delete(e.Xattrs, attr)
		} else {
			e.Xattrs[attr] = slices.Clone(v)
		}
		return nil
	})
}

// bucketXattr reads one bucket attribute (nil when unset).
func (l *Layer) bucketXattr(ctx context.Context, name, attr string) ([]byte, error) {
	e, err := l.bucketEntry(ctx, name)
	if err != nil {
		return nil, err
	}
	return e.Xattrs[attr], nil
}

// SetObjectACL sets the canned ACL of an object's version ("" its latest).
func (l *Layer) SetObjectACL(ctx context.Context, bucket, key, vid, acl string) error {
	return l.SetObjectAccess(ctx, bucket, key, vid, Access{Canned: acl})
}
