package objectapi

import (
	"context"
	"encoding/json"
	"strings"
)

// CORSRule is one rule of a bucket's CORS configuration.
type CORSRule struct {
	ID             string   `json:"id,omitempty"`
	AllowedOrigins []string `json:"origins"`
	AllowedMethods []string `json:"methods"`
	AllowedHeaders []string `json:"headers,omitempty"`
	ExposeHeaders  []string `json:"expose,omitempty"`
	MaxAgeSeconds  int      `json:"maxAge,omitempty"`
}

var corsMethods = map[string]bool{"GET": true, "PUT": true, "HEAD": true, "POST": true, "DELETE": true}

// PutBucketCORS validates and stores rules.
func (l *Layer) PutBucketCORS(ctx context.Context, bucket string, rules []CORSRule) error {
	if len(rules) == 0 || len(rules) > 100 {
		return errorf(ErrMalformedInput, "a CORS configuration has 1 to 100 rules")
	}
	for _, r := range rules {
		if len(r.AllowedOrigins) == 0 || len(r.AllowedMethods) == 0 {
			return errorf(ErrMalformedInput, "a CORS rule needs AllowedOrigin and AllowedMethod")
		}
		for _, m := range r.AllowedMethods {
			if !corsMethods[m] {
				return errorf(ErrInvalidArgument, "unsupported CORS method %q", m)
			}
		}
		for _, o := range r.AllowedOrigins {
			if strings.Count(o, "*") > 1 {
				return errorf(ErrInvalidArgument, "CORS origin %q can contain at most one wildcard", o)
			}
		}
	}
	b, err := json.Marshal(rules)
	if err != nil {
		return err
	}
	return l.setBucketXattr(ctx, bucket, xaCORS, b)
}

// GetBucketCORS returns a bucket's rules; none is ErrNoSuchCORS.
func (l *Layer) GetBucketCORS(ctx context.Context, bucket string) ([]CORSRule, error) {
	v, err := l.bucketXattr(ctx, bucket, xaCORS)
	if err != nil {
		return nil, err
	}
	if len(v) == 0 {
		return nil, errorf(ErrNoSuchCORS, "bucket %q", bucket)
	}
	var rules []CORSRule
	if err := json.Unmarshal(v, &rules); err != nil {
		return nil, errorf(ErrNoSuchCORS, "bucket %q: unreadable configuration: %v", bucket, err)
	}
	return rules, nil
}

// DeleteBucketCORS removes a bucket's rules.
func (l *Layer) DeleteBucketCORS(ctx context.Context, bucket string) error {
	return l.setBucketXattr(ctx, bucket, xaCORS, nil)
}

// MatchCORS returns the first rule allowing origin, method and every one of
// the request headers, as S3 evaluates them.
func MatchCORS(rules []CORSRule, origin, method string, headers []string) (CORSRule, bool) {
	for _, r := range rules {
		if !anyWildcard(r.AllowedOrigins, origin, false) || !anyWildcard(r.AllowedMethods, method, false) {
			continue
		}
		ok := true
		for _, h := range headers {
			if h = strings.TrimSpace(h); h != "" && !anyWildcard(r.AllowedHeaders, h, true) {
				ok = false
				break
			}
		}
		if ok {
			return r, true
		}
	}
	return CORSRule{}, false
}

func anyWildcard(patterns []string, s string, fold bool) bool {
	if fold {
		s = strings.ToLower(s)
	}
	for _, p := range patterns {
		if fold {
			p = strings.ToLower(p)
		}
		before, after, star := strings.Cut(p, "*")
		if !star && p == s || star && len(s) >= len(before)+len(after) && strings.HasPrefix(s, before) && strings.HasSuffix(s, after) {
			return true
		}
	}
	return false
}
