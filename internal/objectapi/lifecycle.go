package objectapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Bucket lifecycle: rules that expire current objects after some days or on
// a date, delete noncurrent versions some days after they were replaced,
// remove delete markers left alone, and abort multipart uploads left
// unfinished. ApplyLifecycle carries them out; the gateway runs it in the
// background. Storage-class transitions do not exist in Kelp.

const xaLifecycle = "s3.lifecycle"

// maxLifecycleRules is S3's limit.
const maxLifecycleRules = 1000

// LifecycleRule is one rule. A rule selects objects by key prefix, tags (all
// must match) and size bounds (0: none), and has at least one action.
type LifecycleRule struct {
	ID      string `json:"id"`
	Enabled bool   `json:"enabled"`

	Prefix          string `json:"prefix,omitempty"`
	Tags            []Tag  `json:"tags,omitempty"`
	SizeGreaterThan int64  `json:"sizeGT,omitempty"`
	SizeLessThan    int64  `json:"sizeLT,omitempty"`

	ExpirationDays            int       `json:"days,omitempty"`
	ExpirationDate            time.Time `json:"date,omitzero"`
	ExpiredObjectDeleteMarker bool      `json:"expiredMarker,omitempty"`
	NoncurrentDays            int       `json:"noncurrentDays,omitempty"`
	NewerNoncurrentVersions   int       `json:"newerNoncurrent,omitempty"`
	AbortIncompleteDays       int       `json:"abortDays,omitempty"`
}

// validate checks a rule as S3 does and fills in a missing ID.
func (r *LifecycleRule) validate() error {
	if r.ID == "" {
		var b [16]byte
		rand.Read(b[:])
		r.ID = hex.EncodeToString(b[:])
	}
	hasExpiration := r.ExpirationDays != 0 || !r.ExpirationDate.IsZero() || r.ExpiredObjectDeleteMarker
	switch {
	case len(r.ID) > 255:
		return errorf(ErrInvalidArgument, "ID length should not exceed allowed limit of 255")
	case !hasExpiration && r.NoncurrentDays == 0 && r.AbortIncompleteDays == 0:
		return errorf(ErrInvalidRequest, "at least one action needs to be specified in rule %q", r.ID)
	case r.ExpirationDays < 0 || r.NoncurrentDays < 0 || r.AbortIncompleteDays < 0 || r.NewerNoncurrentVersions < 0:
		return errorf(ErrInvalidArgument, "rule %q: days and version counts must be positive", r.ID)
	case r.ExpirationDays > 0 && !r.ExpirationDate.IsZero(),
		r.ExpiredObjectDeleteMarker && (r.ExpirationDays > 0 || !r.ExpirationDate.IsZero()):
		return errorf(ErrMalformedInput, "rule %q: Expiration takes one of Days, Date and ExpiredObjectDeleteMarker", r.ID)
	case !r.ExpirationDate.IsZero() && !r.ExpirationDate.Equal(r.ExpirationDate.UTC().Truncate(24*time.Hour)):
		return errorf(ErrInvalidArgument, "rule %q: 'Date' must be at midnight GMT", r.ID)
	case len(r.Tags) > 0 && (r.ExpiredObjectDeleteMarker || r.AbortIncompleteDays > 0):
		return errorf(ErrInvalidRequest, "rule %q: ExpiredObjectDeleteMarker and AbortIncompleteMultipartUpload cannot be specified with Tags", r.ID)
	case r.SizeGreaterThan < 0 || r.SizeLessThan < 0 || (r.SizeLessThan > 0 && r.SizeGreaterThan >= r.SizeLessThan):
		return errorf(ErrInvalidArgument, "rule %q: ObjectSizeGreaterThan must be below ObjectSizeLessThan", r.ID)
	}
	return validTags(EncodeTags(r.Tags), 50)
}

// PutBucketLifecycle validates and stores a bucket's rules, replacing any.
func (l *Layer) PutBucketLifecycle(ctx context.Context, bucket string, rules []LifecycleRule) error {
	if len(rules) == 0 || len(rules) > maxLifecycleRules {
		return errorf(ErrMalformedInput, "a lifecycle configuration has 1 to %d rules", maxLifecycleRules)
	}
	ids := map[string]bool{}
	for i := range rules {
		if err := rules[i].validate(); err != nil {
			return err
		}
		if ids[rules[i].ID] {
			return errorf(ErrInvalidArgument, "rule ID %q is not unique", rules[i].ID)
		}
		ids[rules[i].ID] = true
	}
	b, err := json.Marshal(rules)
	if err != nil {
		return err
	}
	return l.setBucketXattr(ctx, bucket, xaLifecycle, b)
}

// GetBucketLifecycle returns a bucket's rules; none is ErrNoSuchLifecycle.
func (l *Layer) GetBucketLifecycle(ctx context.Context, bucket string) ([]LifecycleRule, error) {
	v, err := l.bucketXattr(ctx, bucket, xaLifecycle)
	if err != nil {
		return nil, err
	}
	if len(v) == 0 {
		return nil, errorf(ErrNoSuchLifecycle, "bucket %q", bucket)
	}
	var rules []LifecycleRule
	if err := json.Unmarshal(v, &rules); err != nil {
		return nil, fmt.Errorf("objectapi: bucket %q: unreadable lifecycle configuration: %w", bucket, err)
	}
	return rules, nil
}

// DecodeLifecycle reads the rules kept in a bucket's lifecycle attribute
// (Bucket.Lifecycle); nil or empty is no rules.
func DecodeLifecycle(raw []byte) ([]LifecycleRule, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var rules []LifecycleRule
	if err := json.Unmarshal(raw, &rules); err != nil {
		return nil, fmt.Errorf("objectapi: unreadable lifecycle configuration: %w", err)
	}
	return rules, nil
}

// Expiration is when the enabled expiration rules remove the current
// object oi, and the ID of the rule that removes it first; a zero time when
// none applies. S3 reports it on PUT, GET and HEAD (x-amz-expiration), so
// that a client learns of the deletion before it happens.
func (l *Layer) Expiration(ctx context.Context, rules []LifecycleRule, oi ObjectInfo) (time.Time, string) {
	var when time.Time
	var id string
	for _, r := range rules {
		if !r.Enabled || (r.ExpirationDays == 0 && r.ExpirationDate.IsZero()) || !strings.HasPrefix(oi.Key, r.Prefix) {
			continue
		}
		at := r.ExpirationDate
		if at.IsZero() {
			at = due(oi.LastModified, r.ExpirationDays)
		}
		if !when.IsZero() && !at.Before(when) {
			continue
		}
		if ok, err := l.matches(ctx, oi.Bucket, r, oi); err != nil || !ok {
			continue
		}
		when, id = at, r.ID
	}
	return when, id
}

// DeleteBucketLifecycle removes a bucket's rules (none is not an error).
func (l *Layer) DeleteBucketLifecycle(ctx context.Context, bucket string) error {
	return l.setBucketXattr(ctx, bucket, xaLifecycle, nil)
}

// LifecycleStats counts what one ApplyLifecycle did.
type LifecycleStats struct {
	Expired, NoncurrentDeleted, MarkersRemoved, UploadsAborted int
}

// due is when something dated t expires after days: S3 adds the days and
// rounds up to the next midnight UTC.
func due(t time.Time, days int) time.Time {
	d := t.UTC().Add(time.Duration(days) * 24 * time.Hour)
	m := d.Truncate(24 * time.Hour)
	if m.Before(d) {
		m = m.Add(24 * time.Hour)
	}
	return m
}

// ApplyLifecycle carries out every bucket's enabled rules as of now. It
// goes on past errors in one bucket and returns the first.
func (l *Layer) ApplyLifecycle(ctx context.Context, now time.Time) (LifecycleStats, error) {
	var st LifecycleStats
	if err := l.pruneCompleted(ctx, now); err != nil {
		l.log.Warn("objectapi: forgetting completed uploads", "err", err)
	}
	buckets, err := l.ListBuckets(ctx)
	if err != nil {
		return st, err
	}
	var first error
	for _, b := range buckets {
		rules, err := l.GetBucketLifecycle(ctx, b.Name)
		if errors.Is(err, ErrNoSuchLifecycle) || errors.Is(err, ErrNoSuchBucket) {
			continue
		}
		for _, r := range rules {
			if err == nil && r.Enabled {
				err = l.applyRule(ctx, b.Name, r, now, &st)
			}
		}
		if err != nil && first == nil && ctx.Err() == nil {
			first = fmt.Errorf("lifecycle of bucket %q: %w", b.Name, err)
		}
		if ctx.Err() != nil {
			return st, ctx.Err()
		}
	}
	return st, first
}

func (l *Layer) applyRule(ctx context.Context, bucket string, r LifecycleRule, now time.Time, st *LifecycleStats) error {
	if r.ExpirationDays > 0 || (!r.ExpirationDate.IsZero() && !now.Before(r.ExpirationDate)) {
		if err := l.expireCurrent(ctx, bucket, r, now, st); err != nil {
			return err
		}
	}
	if r.NoncurrentDays > 0 || r.ExpiredObjectDeleteMarker || r.ExpirationDays > 0 {
		if err := l.expireVersions(ctx, bucket, r, now, st); err != nil {
			return err
		}
	}
	if r.AbortIncompleteDays > 0 {
		return l.abortStale(ctx, bucket, r, now, st)
	}
	return nil
}

// matches reports whether an object falls under the rule's filter.
func (l *Layer) matches(ctx context.Context, bucket string, r LifecycleRule, oi ObjectInfo) (bool, error) {
	if (r.SizeGreaterThan > 0 && oi.Size <= r.SizeGreaterThan) || (r.SizeLessThan > 0 && oi.Size >= r.SizeLessThan) {
		return false, nil
	}
	if len(r.Tags) == 0 {
		return true, nil
	}
	if oi.TagCount < len(r.Tags) {
		return false, nil
	}
	tags, err := l.GetObjectTagging(ctx, bucket, oi.Key, oi.VersionID)
	if err != nil {
		return false, err
	}
	for _, want := range r.Tags {
		found := false
		for _, t := range tags {
			found = found || t == want
		}
		if !found {
			return false, nil
		}
	}
	return true, nil
}

// expireCurrent deletes the current objects the rule has expired (in a
// versioned bucket, by adding a delete marker, as S3 does).
func (l *Layer) expireCurrent(ctx context.Context, bucket string, r LifecycleRule, now time.Time, st *LifecycleStats) error {
	after := ""
	for {
		page, err := l.ListObjects(ctx, bucket, ListOptions{Prefix: r.Prefix, After: after, MaxKeys: pageSize})
		if err != nil {
			return err
		}
		for _, oi := range page.Objects {
			expired := !r.ExpirationDate.IsZero() || !now.Before(due(oi.LastModified, r.ExpirationDays))
			if !expired {
				continue
			}
			ok, err := l.matches(ctx, bucket, r, oi)
			if err != nil && !errors.Is(err, ErrNoSuchKey) {
				return err
			}
			if !ok {
				continue
			}
			err = l.DeleteObject(ctx, bucket, oi.Key)
			switch {
			case errors.Is(err, ErrObjectLocked):
				continue // a locked directory object (not versioned): kept
			case err != nil && !errors.Is(err, ErrNoSuchKey):
				return err
			}
			st.Expired++
		}
		if !page.IsTruncated {
			return nil
		}
		after = page.Next
	}
}

// expireVersions deletes noncurrent versions NoncurrentDays after they
// were replaced (keeping the NewerNoncurrentVersions newest), and delete
// markers that are a key's only version left.
func (l *Layer) expireVersions(ctx context.Context, bucket string, r LifecycleRule, now time.Time, st *LifecycleStats) error {
	var (
		opts ListVersionsOptions
		key  string    // the key whose versions are being walked
		prev time.Time // when the previous (newer) version of key was made
		nth  int       // noncurrent versions of key seen so far
		only []ObjectInfo
	)
	opts.Prefix, opts.MaxKeys = r.Prefix, pageSize
	var markers []ObjectInfo // latest delete markers, checked when their key ends
	flush := func() {
		if len(only) == 1 && only[0].DeleteMarker && only[0].IsLatest {
			markers = append(markers, only[0])
		}
		only = only[:0]
	}
	for {
		page, err := l.ListObjectVersions(ctx, bucket, opts)
		if err != nil {
			return err
		}
		for _, v := range page.Versions {
			if v.Key != key {
				flush()
				key, nth = v.Key, 0
			}
			only = append(only, v)
			if !v.IsLatest && r.NoncurrentDays > 0 && !v.DeleteMarker {
				nth++
				if nth > r.NewerNoncurrentVersions && !now.Before(due(prev, r.NoncurrentDays)) {
					if ok, err := l.matches(ctx, bucket, r, v); err != nil && !errors.Is(err, ErrNoSuchKey) {
						return err
					} else if ok {
						_, err := l.DeleteObjectVersion(ctx, bucket, v.Key, v.VersionID)
						switch {
						case errors.Is(err, ErrObjectLocked):
							// Object lock keeps it; a later run removes it.
						case err != nil && !errors.Is(err, ErrNoSuchVersion):
							return err
						default:
							st.NoncurrentDeleted++
						}
					}
				}
			}
			prev = v.LastModified
		}
		if !page.IsTruncated {
			break
		}
		opts.KeyMarker, opts.VersionIDMarker = page.NextKeyMarker, page.NextVersionIDMarker
	}
	flush()
	if !r.ExpiredObjectDeleteMarker && r.ExpirationDays == 0 {
		return nil
	}
	// S3 removes a delete marker left alone when the rule asks for it, and
	// with an Expiration in days as well.
	for _, m := range markers {
		if _, err := l.DeleteObjectVersion(ctx, bucket, m.Key, m.VersionID); err != nil && !errors.Is(err, ErrNoSuchVersion) {
			return err
		}
		st.MarkersRemoved++
	}
	return nil
}

// abortStale aborts the uploads under the rule's prefix begun more than
// AbortIncompleteDays ago.
func (l *Layer) abortStale(ctx context.Context, bucket string, r LifecycleRule, now time.Time, st *LifecycleStats) error {
	res, err := l.ListMultipartUploads(ctx, bucket, ListUploadsOptions{Prefix: r.Prefix, MaxUploads: 1 << 30})
	if err != nil {
		return err
	}
	for _, u := range res.Uploads {
		if now.Before(due(u.Initiated, r.AbortIncompleteDays)) {
			continue
		}
		if err := l.AbortMultipartUpload(ctx, bucket, u.Key, u.UploadID); err != nil && !errors.Is(err, ErrNoSuchUpload) {
			return err
		}
		st.UploadsAborted++
	}
	return nil
}
