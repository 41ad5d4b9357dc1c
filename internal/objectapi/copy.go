package objectapi

import (
	"context"
	"errors"
	"time"

	"github.com/kelpfs/kelp/internal/filer"
	"github.com/kelpfs/kelp/internal/sse"
)

// CopyOptions describe a CopyObject.
type CopyOptions struct {
	// Replace takes Metadata as the new object's metadata (directive
	// REPLACE); otherwise the source's is copied (COPY).
	Replace  bool
	Metadata Metadata
	// ReplaceTags takes Metadata.Tags (x-amz-tagging-directive REPLACE)
	// even when the rest of the metadata is copied.
	ReplaceTags bool
	// SourceConditions are the x-amz-copy-source-if-* headers; any failure
	// is ErrPreconditionFailed.
	SourceConditions Conditions
	// ChecksumAlgorithm, when set, computes that checksum for the copy;
	// otherwise the source's algorithm is used, if any.
	ChecksumAlgorithm string
	// SourceVersionID copies that version of the source ("" the latest).
	SourceVersionID string
	// IfMatch, IfNoneMatch and IfUnmodifiedSince are the destination's
	// preconditions, as in PutOptions.
	IfMatch, IfNoneMatch string
	IfUnmodifiedSince    time.Time
	// Keys.Source gives the data key of an encrypted source; the copy is
	// encrypted as Metadata.Encryption says (whatever the source was).
	Keys Keys
}

// copySourceErr refuses a copy from a delete marker named by version id,
// as S3 does, with a 400 rather than the 405 of a GET.
func copySourceErr(err error) error {
	var dm *DeleteMarkerError
	if errors.As(err, &dm) && errors.Is(err, ErrMethodNotAllowed) {
		return errorf(ErrInvalidArgument, "the source of a copy may not refer to a delete marker by version id")
	}
	return err
}

// CopyObject copies srcBucket/srcKey to bucket/key. Copying an object onto
// itself only changes its metadata (no data moves) and needs Replace;
// other copies stream the content into new chunks, since chunks are never
// shared between entries (each entry's garbage collection owns them).
func (l *Layer) CopyObject(ctx context.Context, srcBucket, srcKey, bucket, key string, opts CopyOptions) (ObjectInfo, error) {
	si, src, err := l.readableVersion(ctx, srcBucket, srcKey, opts.SourceVersionID)
	if err != nil {
		return ObjectInfo{}, copySourceErr(err)
	}
	if err := opts.SourceConditions.check(si.ETag, si.LastModified, true); err != nil {
		return ObjectInfo{}, err
	}
	md := metadataOf(si)
	if opts.Replace {
		tags := md.Tags
		md = opts.Metadata
		md.Tags = tags
	}
	if opts.ReplaceTags {
		md.Tags = opts.Metadata.Tags
	}
	md.ACL, md.Grants, md.Owner = opts.Metadata.ACL, opts.Metadata.Grants, opts.Metadata.Owner // the copy's own, never the source's
	md.Lock = opts.Metadata.Lock                                                               // likewise
	md.Encryption = opts.Metadata.Encryption
	srcDEK, err := dataKey(opts.Keys.Source, si.SSE)
	if err != nil {
		return ObjectInfo{}, err
	}
	if err := validTags(md.Tags, 10); err != nil {
		return ObjectInfo{}, err
	}
	if srcBucket == bucket && srcKey == key && opts.SourceVersionID == "" {
		if !opts.Replace && !opts.ReplaceTags && md.Encryption == nil && si.SSE == nil {
			return ObjectInfo{}, errorf(ErrInvalidCopySource, "copying %q onto itself needs a metadata change", key)
		}
	}
	if srcBucket == bucket && srcKey == key && opts.SourceVersionID == "" && !l.versioned(ctx, bucket) &&
		si.SSE == nil && md.Encryption == nil {
		// Unversioned: change the metadata in place, no data moves.
		if !md.Lock.IsZero() { // object lock makes a bucket versioned
			return ObjectInfo{}, errorf(ErrInvalidRequest, "Bucket is missing Object Lock Configuration")
		}
		var e *filer.Entry
		check := l.checker(bucket, key, WriteConditions{IfMatch: opts.IfMatch, IfNoneMatch: opts.IfNoneMatch, IfUnmodifiedSince: opts.IfUnmodifiedSince})
		err := l.ns.ModifyEntry(ctx, src.Path, func(ne *filer.Entry) error {
			if check != nil {
				if err := check(ne); err != nil {
					return err
				}
			}
			applyMeta(ne, md)
			ne.Mtime = l.now()
			e = ne
			return nil
		})
		if err != nil {
			return ObjectInfo{}, nsErr(err, key)
		}
		return l.info(bucket, e), nil
	}
	if _, _, err := l.objectPath(bucket, key); err != nil {
		return ObjectInfo{}, err
	}
	if _, err := l.bucketEntry(ctx, bucket); err != nil {
		return ObjectInfo{}, err
	}
	body, err := l.openPlain(ctx, src, si, func(*sse.Meta) ([]byte, error) { return srcDEK, nil }, 0, si.Size, true)
	if err != nil {
		return ObjectInfo{}, err
	}
	defer body.Close()
	alg := opts.ChecksumAlgorithm
	if alg == "" && si.Checksum.Type != ChecksumComposite {
		alg = si.Checksum.Algorithm
	}
	po := PutOptions{Metadata: md, Size: si.Size, Checksum: ChecksumSpec{Algorithm: alg}, IfMatch: opts.IfMatch, IfNoneMatch: opts.IfNoneMatch,
		IfUnmodifiedSince: opts.IfUnmodifiedSince}
	oi, err := l.PutObject(ctx, bucket, key, body, po)
	if errors.Is(err, filer.ErrNotFound) {
		return ObjectInfo{}, errorf(ErrNoSuchKey, "%q", srcKey)
	}
	return oi, err
}
