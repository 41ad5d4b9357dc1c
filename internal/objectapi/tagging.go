package objectapi

import (
	"context"
	"net/url"
	"sort"
	"unicode/utf8"

	"github.com/kelpfs/kelp/internal/filer"
)

// Tag is one key/value tag.
type Tag struct{ Key, Value string }

// EncodeTags turns a tag set into the URL query form used by x-amz-tagging
// and the stored attribute.
func EncodeTags(tags []Tag) string {
	q := url.Values{}
	for _, t := range tags {
		q.Set(t.Key, t.Value)
	}
	return q.Encode()
}

// DecodeTags parses the URL query form (x-amz-tagging) into a sorted set.
func DecodeTags(s string) ([]Tag, error) {
	q, err := url.ParseQuery(s)
	if err != nil {
		return nil, errorf(ErrInvalidTag, "tagging %q: %v", s, err)
	}
	out := make([]Tag, 0, len(q))
	for k, vs := range q {
		if len(vs) != 1 {
			return nil, errorf(ErrInvalidTag, "tag %q given %d times", k, len(vs))
		}
		out = append(out, Tag{k, vs[0]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// validTags checks an encoded tag set against S3's limits.
func validTags(enc string, maxTags int) error {
	if enc == "" {
		return nil
	}
	tags, err := DecodeTags(enc)
	if err != nil {
		return err
	}
	return checkTags(tags, maxTags)
}

func checkTags(tags []Tag, maxTags int) error {
	if len(tags) > maxTags {
		return errorf(ErrInvalidTag, "%d tags, at most %d allowed", len(tags), maxTags)
	}
	seen := map[string]bool{}
	for _, t := range tags {
		if t.Key == "" || utf8.RuneCountInString(t.Key) > 128 || utf8.RuneCountInString(t.Value) > 256 {
			return errorf(ErrInvalidTag, "tag %q: keys are 1 to 128 characters, values at most 256", t.Key)
		}
		if seen[t.Key] {
			return errorf(ErrInvalidTag, "tag %q given twice", t.Key)
		}
		seen[t.Key] = true
	}
	return nil
}

// GetObjectTagging returns the tags (possibly none) of version vid of an
// object ("" the latest).
func (l *Layer) GetObjectTagging(ctx context.Context, bucket, key, vid string) ([]Tag, error) {
	_, e, err := l.readableVersion(ctx, bucket, key, vid)
	if err != nil {
		return nil, err
	}
	return DecodeTags(string(e.Xattrs[xaTags]))
}

// PutObjectTagging replaces the tags of version vid of an object ("" the
// latest); nil removes them. Tags are not versioned: the version changes
// in place.
func (l *Layer) PutObjectTagging(ctx context.Context, bucket, key, vid string, tags []Tag) error {
	if err := checkTags(tags, 10); err != nil {
		return err
	}
	_, e, err := l.readableVersion(ctx, bucket, key, vid)
	if err != nil {
		return err
	}
	return nsErr(l.ns.ModifyEntry(ctx, e.Path, func(ne *filer.Entry) error {
		if len(tags) == 0 {
			delete(ne.Xattrs, xaTags)
		} else {
			ne.Xattrs[xaTags] = []byte(EncodeTags(tags))
		}
		return nil
	}), key)
}

// GetBucketTagging returns a bucket's tags; none is ErrNoSuchTagSet.
func (l *Layer) GetBucketTagging(ctx context.Context, bucket string) ([]Tag, error) {
	v, err := l.bucketXattr(ctx, bucket, xaTags)
	if err != nil {
		return nil, err
	}
	if len(v) == 0 {
		return nil, errorf(ErrNoSuchTagSet, "bucket %q", bucket)
	}
	return DecodeTags(string(v))
}

// PutBucketTagging replaces a bucket's tags; nil removes them.
func (l *Layer) PutBucketTagging(ctx context.Context, bucket string, tags []Tag) error {
	if err := checkTags(tags, 50); err != nil {
		return err
	}
	var v []byte
	if len(tags) > 0 {
		v = []byte(EncodeTags(tags))
	}
	return l.setBucketXattr(ctx, bucket, xaTags, v)
}
