package objectapi

import (
	"errors"
	"testing"
)

func TestPolicyResourcesAcrossBuckets(t *testing.T) {
	doc := func(res string) []byte {
		return []byte(`{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"` + res + `"}]}`)
	}
	for _, tc := range []struct {
		res   string
		ok    bool
		match string // an ARN it must match when ok
	}{
		{"arn:aws:s3:::*", true, "arn:aws:s3:::bucket/k"},
		{"arn:aws:s3:::*/*", true, "arn:aws:s3:::bucket/a/b"},
		{"arn:aws:s3:::buck*/key*", true, "arn:aws:s3:::bucket/key1"},
		{"arn:aws:s3:::b?cket", true, "arn:aws:s3:::bucket"},
		{"*", false, ""},
		{"arn:aws:s3:::bucket/*", true, "arn:aws:s3:::bucket/x"},
		{"arn:aws:s3:::other/*", false, ""},
		{"arn:aws:s3:::bucketx/*", false, ""},
		{"arn:aws:s3:::bu", false, ""},
		{"arn:aws:s3:::?/k", false, ""},
		{"arn:aws:s3:::*x/k", true, "arn:aws:s3:::bucket/ax/k"}, // IAM's * also matches /
		{"arn:aws:iam::*", false, ""},
	} {
		p, err := ParsePolicy("bucket", doc(tc.res))
		if !tc.ok {
			if !errors.Is(err, ErrMalformedPolicy) {
				t.Errorf("%s: %v, want ErrMalformedPolicy", tc.res, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.res, err)
			continue
		}
		if allow, _ := p.Evaluate(nil, "s3:GetObject", tc.match, nil); !allow {
			t.Errorf("%s does not allow %s", tc.res, tc.match)
		}
	}
}
