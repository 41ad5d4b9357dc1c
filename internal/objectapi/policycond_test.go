package objectapi

import (
	"encoding/json"
	"testing"
)

func TestPolicyConditions(t *testing.T) {
	ctx := ConditionValues{
		"aws:sourceip":            {"192.168.1.20"},
		"aws:securetransport":     {"false"},
		"aws:username":            {"alice"},
		"aws:currenttime":         {"2026-11-30T10:00:00Z"},
		"s3:prefix":               {"home/alice/docs/"},
		"s3:max-keys":             {"50"},
		"s3:requestobjecttagkeys": {"team", "owner"},
	}
	for _, c := range []struct {
		cond string
		want bool
	}{
		{`{"IpAddress": {"aws:SourceIp": "192.168.0.0/16"}}`, true},
		{`{"IpAddress": {"aws:SourceIp": ["10.0.0.0/8", "192.168.1.20"]}}`, true},
		{`{"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}`, false},
		{`{"NotIpAddress": {"aws:SourceIp": "10.0.0.0/8"}}`, true},
		{`{"Bool": {"aws:SecureTransport": false}}`, true},
		{`{"Bool": {"aws:SecureTransport": "true"}}`, false},
		{`{"StringEquals": {"aws:username": "alice"}}`, true},
		{`{"StringEqualsIgnoreCase": {"aws:UserName": "ALICE"}}`, true},
		{`{"StringNotEquals": {"aws:username": ["bob", "carol"]}}`, true},
		{`{"StringLike": {"s3:prefix": "home/${aws:username}/*"}}`, true},
		{`{"StringLike": {"s3:prefix": "home/bob/*"}}`, false},
		{`{"StringNotLike": {"s3:prefix": "home/bob/*"}}`, true},
		{`{"NumericLessThanEquals": {"s3:max-keys": 100}}`, true},
		{`{"NumericGreaterThan": {"s3:max-keys": "100"}}`, false},
		{`{"DateLessThan": {"aws:CurrentTime": "2027-01-01T00:00:00Z"}}`, true},
		{`{"DateGreaterThan": {"aws:CurrentTime": "2027-01-01T00:00:00Z"}}`, false},
		// Absent keys: false, except negated, IfExists and Null.
		{`{"StringEquals": {"aws:referer": "http://site/"}}`, false},
		{`{"StringEqualsIfExists": {"aws:referer": "http://site/"}}`, true},
		{`{"StringNotEquals": {"aws:referer": "http://site/"}}`, true},
		{`{"Null": {"aws:referer": "true"}}`, true},
		{`{"Null": {"aws:username": "true"}}`, false},
		{`{"Null": {"aws:username": false}}`, true},
		// Set operators over a multi-valued key.
		{`{"ForAnyValue:StringEquals": {"s3:RequestObjectTagKeys": ["owner", "x"]}}`, true},
		{`{"ForAllValues:StringEquals": {"s3:RequestObjectTagKeys": ["owner", "x"]}}`, false},
		{`{"ForAllValues:StringEquals": {"s3:RequestObjectTagKeys": ["owner", "team", "x"]}}`, true},
		// Every block and every key must hold.
		{`{"IpAddress": {"aws:SourceIp": "192.168.0.0/16"}, "StringEquals": {"aws:username": "bob"}}`, false},
		{`{"StringEquals": {"aws:username": "alice", "s3:max-keys": "50"}}`, true},
	} {
		conds, err := parseConditions(json.RawMessage(c.cond))
		if err != nil {
			t.Fatalf("%s: %v", c.cond, err)
		}
		st := PolicyStatement{conditions: conds}
		if got := st.conditionsHold(ctx); got != c.want {
			t.Errorf("%s = %v, want %v", c.cond, got, c.want)
		}
	}
	for _, bad := range []string{
		`{"StringSounds": {"k": "v"}}`, `{"IpAddress": {"aws:SourceIp": "not-an-ip"}}`, `{"StringEquals": {}}`,
		`{"StringEquals": {"k": []}}`, `{"StringEquals": {"k": {"x": 1}}}`, `{"ForSomeValues:StringEquals": {"k": "v"}}`, `[1]`,
	} {
		if _, err := parseConditions(json.RawMessage(bad)); err == nil {
			t.Errorf("%s parsed", bad)
		}
	}
}

// A condition key no request carries is refused, as AWS refuses it: a
// Deny on it would otherwise never apply (it was accepted before).
func TestPolicyUnknownConditionKey(t *testing.T) {
	doc := func(cond string) []byte {
		return []byte(`{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":` + cond + `}]}`)
	}
	for _, bad := range []string{
		`{"StringEquals": {"s3:ExistingObjectTag/": "secret"}}`,
		`{"StringEquals": {"aws:SourceVpc": "vpc-1"}}`,
		`{"StringLike": {"s3:RequestObjectTag/": "x"}}`,
	} {
		if _, err := ParsePolicy("b", doc(bad)); err == nil {
			t.Errorf("policy with condition %s was accepted", bad)
		}
	}
	for _, good := range []string{
		`{"StringEquals": {"s3:RequestObjectTag/class": "secret"}}`,
		`{"StringEquals": {"s3:ExistingObjectTag/class": "secret"}}`,
		`{"StringEquals": {"S3:x-amz-server-side-encryption": "AES256"}}`,
		`{"NumericGreaterThan": {"s3:object-lock-remaining-retention-days": "10"}}`,
	} {
		if _, err := ParsePolicy("b", doc(good)); err != nil {
			t.Errorf("policy with condition %s: %v", good, err)
		}
	}
}
