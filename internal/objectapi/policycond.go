package objectapi

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Policy conditions, as in the IAM policy language:
//
//	"Condition": {"IpAddress": {"aws:SourceIp": ["10.0.0.0/8"]},
//	              "StringLike": {"s3:prefix": "home/${aws:username}/*"}}
//
// Every operator block must hold, and within one every key; a key holds when
// the request's value matches any of the listed ones (none of them, for the
// negated operators). A key the request does not have fails the condition,
// except with a negated operator or an ...IfExists one; Null tests presence.
// ForAnyValue: / ForAllValues: compare a multi-valued key value by value.
// Policy variables (${aws:username}, ...) are replaced in string values.

// ConditionValues are a request's condition keys (lower case, such as
// "aws:sourceip" or "s3:prefix") and their values.
type ConditionValues map[string][]string

// policyCondition is one key of one operator block.
type policyCondition struct {
	op       condOp
	negated  bool
	ifExists bool
	set      string // "", "foranyvalue" or "forallvalues"
	key      string // lower case
	values   []string
}

// condOp compares one request value with one policy value.
type condOp func(req, pol string) bool

var condOps = map[string]struct {
	op      condOp
	negated bool
}{
	"stringequals":              {strEq, false},
	"stringnotequals":           {strEq, true},
	"stringequalsignorecase":    {strings.EqualFold, false},
	"stringnotequalsignorecase": {strings.EqualFold, true},
	"stringlike":                {strLike, false},
	"stringnotlike":             {strLike, true},
	"numericequals":             {numCmp(func(c int) bool { return c == 0 }), false},
	"numericnotequals":          {numCmp(func(c int) bool { return c == 0 }), true},
	"numericlessthan":           {numCmp(func(c int) bool { return c < 0 }), false},
	"numericlessthanequals":     {numCmp(func(c int) bool { return c <= 0 }), false},
	"numericgreaterthan":        {numCmp(func(c int) bool { return c > 0 }), false},
	"numericgreaterthanequals":  {numCmp(func(c int) bool { return c >= 0 }), false},
	"dateequals":                {dateCmp(func(c int) bool { return c == 0 }), false},
	"datenotequals":             {dateCmp(func(c int) bool { return c == 0 }), true},
	"datelessthan":              {dateCmp(func(c int) bool { return c < 0 }), false},
	"datelessthanequals":        {dateCmp(func(c int) bool { return c <= 0 }), false},
	"dategreaterthan":           {dateCmp(func(c int) bool { return c > 0 }), false},
	"dategreaterthanequals":     {dateCmp(func(c int) bool { return c >= 0 }), false},
	"bool":                      {strings.EqualFold, false},
	"ipaddress":                 {ipIn, false},
	"notipaddress":              {ipIn, true},
	"null":                      {nil, false}, // handled in holds
}

func strEq(a, b string) bool   { return a == b }
func strLike(a, b string) bool { return Glob(b, a) }

func numCmp(ok func(int) bool) condOp {
	return func(req, pol string) bool {
		a, err1 := strconv.ParseFloat(req, 64)
		b, err2 := strconv.ParseFloat(pol, 64)
		return err1 == nil && err2 == nil && ok(cmpFloat(a, b))
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func dateCmp(ok func(int) bool) condOp {
	return func(req, pol string) bool {
		a, err1 := parsePolicyTime(req)
		b, err2 := parsePolicyTime(pol)
		return err1 == nil && err2 == nil && ok(a.Compare(b))
	}
}

// parsePolicyTime reads an ISO 8601 time or epoch seconds.
func parsePolicyTime(s string) (time.Time, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(n, 0), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05Z0700", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("not a date: %q", s)
}

func ipIn(req, pol string) bool {
	ip, err := netip.ParseAddr(req)
	if err != nil {
		return false
	}
	if p, err := netip.ParsePrefix(pol); err == nil {
		return p.Contains(ip.Unmap())
	}
	a, err := netip.ParseAddr(pol)
	return err == nil && a.Unmap() == ip.Unmap()
}

// conditionKeys are the condition keys a request can carry (lower case;
// internal/s3 sets them). A policy naming any other key is refused, as AWS
// refuses it, rather than accepted with a condition that can never hold:
// a Deny on such a key would silently never apply.
var conditionKeys = map[string]bool{
	"aws:securetransport": true, "aws:currenttime": true, "aws:epochtime": true, "aws:principaltype": true,
	"aws:sourceip": true, "aws:referer": true, "aws:useragent": true, "aws:username": true, "aws:userid": true,
	"s3:signatureversion": true, "s3:authtype": true, "s3:prefix": true, "s3:delimiter": true, "s3:max-keys": true,
	"s3:versionid": true, "s3:x-amz-acl": true, "s3:x-amz-copy-source": true, "s3:x-amz-metadata-directive": true,
	"s3:x-amz-server-side-encryption": true, "s3:x-amz-storage-class": true, "s3:x-amz-content-sha256": true,
	"s3:requestobjecttagkeys": true, "s3:object-lock-mode": true, "s3:object-lock-retain-until-date": true,
	"s3:object-lock-legal-hold": true, "s3:object-lock-remaining-retention-days": true,
}

// requestObjectTagPrefix starts the keys s3:RequestObjectTag/KEY (the
// tags a write asks for), existingObjectTagPrefix the keys
// s3:ExistingObjectTag/KEY (the tags of the object a request names).
const (
	requestObjectTagPrefix  = "s3:requestobjecttag/"
	existingObjectTagPrefix = "s3:existingobjecttag/"
)

func knownConditionKey(k string) bool {
	for _, p := range []string{requestObjectTagPrefix, existingObjectTagPrefix} {
		if strings.HasPrefix(k, p) && len(k) > len(p) {
			return true
		}
	}
	return conditionKeys[k]
}

// ExistingObjectTagKey is the condition key under which the gateway puts
// the value of the named object's tag name (ConditionValues).
func ExistingObjectTagKey(name string) string {
	return existingObjectTagPrefix + strings.ToLower(name)
}

// parseConditions decodes a statement's Condition element.
func parseConditions(raw json.RawMessage) ([]policyCondition, error) {
	var blocks map[string]map[string]json.RawMessage
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, fmt.Errorf("Condition must map operators to {key: value(s)}: %v", err)
	}
	var out []policyCondition
	for name, keys := range blocks {
		c := policyCondition{}
		op := strings.ToLower(name)
		if set, rest, ok := strings.Cut(op, ":"); ok {
			if set != "foranyvalue" && set != "forallvalues" {
				return nil, fmt.Errorf("unknown Condition set operator %q", name)
			}
			c.set, op = set, rest
		}
		if base, ok := strings.CutSuffix(op, "ifexists"); ok && base != "null" {
			c.ifExists, op = true, base
		}
		def, ok := condOps[op]
		if !ok {
			return nil, fmt.Errorf("unknown Condition operator %q", name)
		}
		c.op, c.negated = def.op, def.negated
		if len(keys) == 0 {
			return nil, fmt.Errorf("Condition operator %q has no key", name)
		}
		for key, val := range keys {
			vals, err := conditionValues(val)
			if err != nil {
				return nil, fmt.Errorf("Condition %s %s: %v", name, key, err)
			}
			if op == "ipaddress" || op == "notipaddress" {
				for _, v := range vals {
					if _, err := netip.ParsePrefix(v); err != nil {
						if _, err := netip.ParseAddr(v); err != nil {
							return nil, fmt.Errorf("Condition %s %s: %q is not an IP address or CIDR block", name, key, v)
						}
					}
				}
			}
			k := c
			k.key, k.values = strings.ToLower(key), vals
			if !knownConditionKey(k.key) {
				return nil, fmt.Errorf("Condition %s: unknown condition key %q", name, key)
			}
			out = append(out, k)
		}
	}
	return out, nil
}

// conditionValues reads a string, number or boolean, or a list of them.
func conditionValues(raw json.RawMessage) ([]string, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		list = []json.RawMessage{raw}
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("no value")
	}
	out := make([]string, 0, len(list))
	for _, item := range list {
		var v any
		if err := json.Unmarshal(item, &v); err != nil {
			return nil, err
		}
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case bool:
			out = append(out, strconv.FormatBool(x))
		case float64:
			out = append(out, string(item))
		default:
			return nil, fmt.Errorf("values must be strings, numbers or booleans")
		}
	}
	return out, nil
}

// holds evaluates the condition against the request's values.
func (c *policyCondition) holds(ctx ConditionValues) bool {
	req, present := ctx[c.key]
	present = present && len(req) > 0
	if c.op == nil { // Null: "true" means the key must be absent
		want := len(c.values) > 0 && strings.EqualFold(c.values[0], "true")
		return want != present
	}
	if !present {
		return c.ifExists || c.negated || c.set == "forallvalues"
	}
	pols := make([]string, len(c.values))
	for i, v := range c.values {
		pols[i] = substituteVariables(v, ctx)
	}
	matches := func(r string) bool {
		return slices.ContainsFunc(pols, func(p string) bool { return c.op(r, p) })
	}
	var m bool
	switch c.set {
	case "forallvalues":
		m = !slices.ContainsFunc(req, func(r string) bool { return !matches(r) })
	case "foranyvalue":
		m = slices.ContainsFunc(req, matches)
	default:
		m = matches(req[0])
	}
	return m != c.negated
}

// substituteVariables replaces ${key} with the request's value of key
// (empty when it has none), and ${*}, ${?}, ${$} with the characters.
func substituteVariables(s string, ctx ConditionValues) string {
	if !strings.Contains(s, "${") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			break
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			break
		}
		b.WriteString(s[:i])
		name := s[i+2 : i+j]
		switch name {
		case "*", "?", "$":
			b.WriteString(name)
		default:
			if v := ctx[strings.ToLower(name)]; len(v) > 0 {
				b.WriteString(v[0])
			}
		}
		s = s[i+j+1:]
	}
	b.WriteString(s)
	return b.String()
}
