package sigv4

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"strings"
	"time"
)

// A browser-based upload (POST Object with an HTML form) carries no
// Authorization header: the form holds a base64 policy document and its
// signature, made with the signing key of the credential scope named in the
// form (Signature Version 4: hex HMAC-SHA256 of the base64 policy) or, in
// the older form, with the secret key itself (Version 2: base64
// HMAC-SHA1). What the policy allows is for the gateway to check.

// ErrPostPolicyMissing: a signed form field is present without the others.
var ErrPostPolicyMissing = sentinel("InvalidArgument", 400,
	"A signed form upload needs policy, x-amz-algorithm, x-amz-credential, x-amz-date and x-amz-signature (or AWSAccessKeyId, policy and signature).")

// VerifyPostPolicy checks the signature of a POST form's policy. field
// returns a form field by its lower-case name ("" when absent). A form
// without any signature field is anonymous.
func (v *Verifier) VerifyPostPolicy(field func(name string) string) (*Result, error) {
	policy := field("policy")
	switch {
	case field("x-amz-signature") != "" || field("x-amz-credential") != "" || field("x-amz-algorithm") != "":
		return v.verifyPostV4(policy, field)
	case field("signature") != "" || field("awsaccesskeyid") != "":
		if v.DisableV2 {
			return nil, ErrUnsupportedAuth
		}
		return v.verifyPostV2(policy, field)
	case policy != "":
		return nil, ErrPostPolicyMissing
	}
	return &Result{Anonymous: true, DecodedContentLength: -1}, nil
}

func (v *Verifier) verifyPostV4(policy string, field func(string) string) (*Result, error) {
	sig, cred, amzDate := field("x-amz-signature"), field("x-amz-credential"), field("x-amz-date")
	if policy == "" || sig == "" || cred == "" || amzDate == "" {
		return nil, ErrPostPolicyMissing
	}
	if alg := field("x-amz-algorithm"); alg != algorithm {
		return nil, ErrUnsupportedAuth.with("x-amz-algorithm %q is not %s", alg, algorithm)
	}
	a := &auth{}
	if err := parseCredential(a, cred, ErrAuthorizationQueryParametersError); err != nil {
		return nil, err
	}
	if a.service != serviceS3 {
		return nil, ErrAuthorizationQueryParametersError.with("incorrect service %q. This endpoint belongs to %q.", a.service, serviceS3)
	}
	if v.Region != "" && a.region != v.Region {
		return nil, ErrAuthorizationQueryParametersError.with("the region %q is wrong; expecting %q", a.region, v.Region)
	}
	t, err := time.Parse(timeFormat, amzDate)
	if err != nil || !strings.HasPrefix(amzDate, a.date) {
		return nil, ErrAuthorizationQueryParametersError.with("x-amz-date %q is not of the form yyyyMMddTHHmmssZ on the credential's date", amzDate)
	}
	secret, ok := v.Creds.SecretKey(a.accessKey)
	if !ok {
		return nil, ErrInvalidAccessKeyID
	}
	if !signatureMatches(signingKey(secret, a.date, a.region, a.service), policy, strings.ToLower(sig)) {
		return nil, ErrSignatureDoesNotMatch
	}
	return &Result{AccessKey: a.accessKey, Region: a.region, Time: t, PayloadMode: PayloadUnsigned, DecodedContentLength: -1}, nil
}

func (v *Verifier) verifyPostV2(policy string, field func(string) string) (*Result, error) {
	ak, sig := field("awsaccesskeyid"), field("signature")
	if policy == "" || ak == "" || sig == "" {
		return nil, ErrPostPolicyMissing
	}
	secret, ok := v.Creds.SecretKey(ak)
	if !ok {
		return nil, ErrInvalidAccessKeyID
	}
	want, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return nil, ErrSignatureDoesNotMatch
	}
	m := hmac.New(sha1.New, []byte(secret))
	m.Write([]byte(policy))
	if !hmac.Equal(m.Sum(nil), want) {
		return nil, ErrSignatureDoesNotMatch
	}
	return &Result{AccessKey: ak, SignatureV2: true, PayloadMode: PayloadUnsigned, DecodedContentLength: -1}, nil
}
