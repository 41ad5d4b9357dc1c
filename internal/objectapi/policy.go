package objectapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// maxPolicySize is S3's limit on a bucket policy document.
const maxPolicySize = 20 << 10

// Policy is a parsed bucket policy: the subset of the IAM policy language
// the gateway evaluates (Effect, Principal, Action, Resource, Condition;
// no Not* elements).
type Policy struct {
	Statements []PolicyStatement
}

// PolicyStatement is one statement. Principals holds "*" (everybody,
// signed or not) or access keys / identity names; Actions and Resources
// are lower-cased / as sent patterns with '*' and '?' wildcards.
type PolicyStatement struct {
	Deny       bool
	Principals []string
	Actions    []string // lower case, "s3:getobject"
	Resources  []string // "arn:aws:s3:::bucket" or "arn:aws:s3:::bucket/keypattern"
	conditions []policyCondition
}

// policyJSON is the wire form; the Not* elements are decoded only to
// refuse them with a clear message.
type policyJSON struct {
	Version   string          `json:"Version"`
	ID        string          `json:"Id"`
	Statement json.RawMessage `json:"Statement"`
}

type statementJSON struct {
	Sid          string          `json:"Sid"`
	Effect       string          `json:"Effect"`
	Principal    json.RawMessage `json:"Principal"`
	NotPrincipal json.RawMessage `json:"NotPrincipal"`
	Action       json.RawMessage `json:"Action"`
	NotAction    json.RawMessage `json:"NotAction"`
	Resource     json.RawMessage `json:"Resource"`
	NotResource  json.RawMessage `json:"NotResource"`
	Condition    json.RawMessage `json:"Condition"`
}

const arnPrefix = "arn:aws:s3:::"

// ParsePolicy checks a bucket policy document for bucket; every problem is
// ErrMalformedPolicy with a message naming it.
func ParsePolicy(bucket string, doc []byte) (*Policy, error) {
	if len(doc) > maxPolicySize {
		return nil, errorf(ErrMalformedPolicy, "policies are limited to %d bytes", maxPolicySize)
	}
	var pj policyJSON
	if err := strictJSON(doc, &pj); err != nil {
		return nil, errorf(ErrMalformedPolicy, "%v", err)
	}
	switch pj.Version {
	case "", "2012-10-17", "2008-10-17":
	default:
		return nil, errorf(ErrMalformedPolicy, "unknown policy Version %q", pj.Version)
	}
	var raws []json.RawMessage
	if t := bytes.TrimSpace(pj.Statement); len(t) > 0 && t[0] == '{' {
		raws = []json.RawMessage{t}
	} else if err := json.Unmarshal(pj.Statement, &raws); err != nil || len(raws) == 0 {
		return nil, errorf(ErrMalformedPolicy, "a policy needs a Statement (an object or a non-empty list)")
	}
	p := &Policy{}
	for i, raw := range raws {
		var sj statementJSON
		if err := strictJSON(raw, &sj); err != nil {
			return nil, errorf(ErrMalformedPolicy, "statement %d: %v", i, err)
		}
		st, err := parseStatement(bucket, &sj)
		if err != nil {
			return nil, errorf(ErrMalformedPolicy, "statement %d: %v", i, err)
		}
		p.Statements = append(p.Statements, st)
	}
	return p, nil
}

func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON document")
	}
	return nil
}

func parseStatement(bucket string, sj *statementJSON) (PolicyStatement, error) {
	var st PolicyStatement
	if sj.NotPrincipal != nil || sj.NotAction != nil || sj.NotResource != nil {
		return st, errors.New("NotPrincipal, NotAction and NotResource are not supported")
	}
	if sj.Condition != nil {
		var err error
		if st.conditions, err = parseConditions(sj.Condition); err != nil {
			return st, err
		}
	}
	switch sj.Effect {
	case "Allow":
	case "Deny":
		st.Deny = true
	default:
		return st, fmt.Errorf("invalid Effect %q (want Allow or Deny)", sj.Effect)
	}
	var err error
	if st.Principals, err = parsePrincipal(sj.Principal); err != nil {
		return st, err
	}
	actions, err := stringOrList(sj.Action, "Action")
	if err != nil {
		return st, err
	}
	for _, a := range actions {
		a = strings.ToLower(a)
		if !strings.HasPrefix(a, "s3:") || len(a) == 3 {
			return st, fmt.Errorf("invalid action %q (only s3:* actions apply to a bucket)", a)
		}
		st.Actions = append(st.Actions, a)
	}
	if st.Resources, err = stringOrList(sj.Resource, "Resource"); err != nil {
		return st, err
	}
	for _, r := range st.Resources {
		if !resourceFitsBucket(r, bucket) {
			return st, fmt.Errorf("Policy has invalid resource %q: it matches neither %s%s nor its objects", r, arnPrefix, bucket)
		}
	}
	return st, nil
}

// parsePrincipal accepts "*", {"AWS": "*"}, {"AWS": [names]} and
// {"CanonicalUser": [ids]} (the gateway matches both against the
// requester's access key, name and canonical id).
func parsePrincipal(raw json.RawMessage) ([]string, error) {
	if raw == nil {
		return nil, errors.New("a bucket policy statement needs a Principal")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s != "*" {
			return nil, fmt.Errorf("invalid Principal %q (want \"*\" or {\"AWS\": ...})", s)
		}
		return []string{"*"}, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("invalid Principal: %v", err)
	}
	var out []string
	for k, v := range m {
		if k != "AWS" && k != "CanonicalUser" {
			return nil, fmt.Errorf("unsupported principal type %q (only AWS and CanonicalUser)", k)
		}
		names, err := stringOrList(v, "Principal "+k)
		if err != nil {
			return nil, err
		}
		out = append(out, names...)
	}
	if out == nil {
		return nil, errors.New("empty Principal")
	}
	return out, nil
}

// stringOrList decodes a policy element that is a string or a non-empty
// list of non-empty strings.
func stringOrList(raw json.RawMessage, what string) ([]string, error) {
	if raw == nil {
		return nil, fmt.Errorf("missing %s", what)
	}
	var list []string
	var s string
	if json.Unmarshal(raw, &s) == nil {
		list = []string{s}
	} else if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("%s must be a string or a list of strings", what)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("empty %s", what)
	}
	for _, v := range list {
		if v == "" {
			return nil, fmt.Errorf("empty string in %s", what)
		}
	}
	return list, nil
}

// Evaluate reports whether a statement allows and whether one denies
// action (such as "s3:GetObject", any case) on resource (an ARN) for a
// requester known by principals (none for anonymous; "*" statements
// match everybody) whose request has the condition values ctx.
func (p *Policy) Evaluate(principals []string, action, resource string, ctx ConditionValues) (allow, deny bool) {
	action = strings.ToLower(action)
	for _, st := range p.Statements {
		if !st.matchesPrincipal(principals) || !anyGlob(st.Actions, action) || !anyGlob(st.Resources, resource) ||
			!st.conditionsHold(ctx) {
			continue
		}
		if st.Deny {
			deny = true
		} else {
			allow = true
		}
	}
	return allow, deny
}

// AllowsAction reports whether an Allow statement grants action to the
// requester on some resource (for requests that name their objects in
// the body, which are then checked one by one).
func (p *Policy) AllowsAction(principals []string, action string, ctx ConditionValues) bool {
	action = strings.ToLower(action)
	for _, st := range p.Statements {
		if !st.Deny && st.matchesPrincipal(principals) && anyGlob(st.Actions, action) && st.conditionsHold(ctx) {
			return true
		}
	}
	return false
}

// Conditional reports whether any statement has a Condition, that is,
// whether Evaluate needs the request's condition values at all.
func (p *Policy) Conditional() bool {
	for i := range p.Statements {
		if len(p.Statements[i].conditions) > 0 {
			return true
		}
	}
	return false
}

// UsesExistingObjectTags reports whether a condition names an
// s3:ExistingObjectTag key, that is, whether Evaluate needs the tags of
// the object a request names (which cost the gateway a read).
func (p *Policy) UsesExistingObjectTags() bool {
	for i := range p.Statements {
		for _, c := range p.Statements[i].conditions {
			if strings.HasPrefix(c.key, existingObjectTagPrefix) {
				return true
			}
		}
	}
	return false
}

func (st *PolicyStatement) conditionsHold(ctx ConditionValues) bool {
	for i := range st.conditions {
		if !st.conditions[i].holds(ctx) {
			return false
		}
	}
	return true
}

func (st *PolicyStatement) matchesPrincipal(principals []string) bool {
	for _, sp := range st.Principals {
		if sp == "*" {
			return true
		}
		for _, p := range principals {
			if sp == p {
				return true
			}
		}
	}
	return false
}

func anyGlob(patterns []string, s string) bool {
	for _, p := range patterns {
		if Glob(p, s) {
			return true
		}
	}
	return false
}

// Glob matches s against pattern, where '*' is any run of bytes ('/'
// included, as in IAM) and '?' is one byte.
func Glob(pattern, s string) bool {
	px, sx := 0, 0
	starP, starS := -1, 0 // the last '*' seen and where its match ends
	for sx < len(s) {
		switch {
		case px < len(pattern) && (pattern[px] == '?' || pattern[px] == s[sx]):
			px++
			sx++
		case px < len(pattern) && pattern[px] == '*':
			starP, starS = px, sx
			px++
		case starP >= 0:
			starS++
			px, sx = starP+1, starS
		default:
			return false
		}
	}
	for px < len(pattern) && pattern[px] == '*' {
		px++
	}
	return px == len(pattern)
}

// PutBucketPolicy validates doc with ParsePolicy and stores it as sent.
func (l *Layer) PutBucketPolicy(ctx context.Context, bucket string, doc []byte) error {
	// A missing bucket is NoSuchBucket, whatever the document says.
	if _, err := l.bucketEntry(ctx, bucket); err != nil {
		return err
	}
	if _, err := ParsePolicy(bucket, doc); err != nil {
		return err
	}
	return l.setBucketXattr(ctx, bucket, xaPolicy, doc)
}

// GetBucketPolicy returns the stored document; none is ErrNoSuchBucketPolicy.
func (l *Layer) GetBucketPolicy(ctx context.Context, bucket string) ([]byte, error) {
	v, err := l.bucketXattr(ctx, bucket, xaPolicy)
	if err != nil {
		return nil, err
	}
	if len(v) == 0 {
		return nil, errorf(ErrNoSuchBucketPolicy, "bucket %q", bucket)
	}
	return v, nil
}

// DeleteBucketPolicy removes a bucket's policy (none is not an error).
func (l *Layer) DeleteBucketPolicy(ctx context.Context, bucket string) error {
	return l.setBucketXattr(ctx, bucket, xaPolicy, nil)
}
