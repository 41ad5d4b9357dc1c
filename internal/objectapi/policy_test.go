package objectapi

import (
	"errors"
	"testing"
)

func TestGlob(t *testing.T) {
	cases := []struct {
		p, s string
		want bool
	}{
		{"a/*", "a/b/c", true},
		{"a/*", "a", false},
		{"a/*", "a/", true},
		{"*.jpg", "x/y.jpg", true},
		{"*.jpg", "x/y.jpeg", false},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"*", "", true},
		{"", "x", false},
		{"s3:get*", "s3:getobject", true},
	}
	for _, c := range cases {
		if got := Glob(c.p, c.s); got != c.want {
			t.Errorf("Glob(%q, %q) = %v, want %v", c.p, c.s, got, c.want)
		}
	}
}

func TestParseAndEvaluatePolicy(t *testing.T) {
	doc := `{"Version":"2012-10-17","Statement":[
	  {"Effect":"Allow","Principal":"*","Action":"s3:Get*","Resource":"arn:aws:s3:::b/pub/*"},
	  {"Effect":"Allow","Principal":{"AWS":["AK1","bob"]},"Action":["S3:PutObject","s3:ListBucket"],"Resource":["arn:aws:s3:::b","arn:aws:s3:::b/up/*"]},
	  {"Effect":"Deny","Principal":{"AWS":"*"},"Action":"s3:*","Resource":"arn:aws:s3:::b/pub/secret?"}]}`
	p, err := ParsePolicy("b", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		who              []string
		action, resource string
		allow, deny      bool
	}{
		{nil, "s3:GetObject", "arn:aws:s3:::b/pub/x/y", true, false},
		{nil, "s3:GetObject", "arn:aws:s3:::b/other", false, false},
		{nil, "s3:PutObject", "arn:aws:s3:::b/up/x", false, false},
		{[]string{"AK9", "bob"}, "s3:PutObject", "arn:aws:s3:::b/up/x", true, false},
		{[]string{"AK1", "alice"}, "s3:ListBucket", "arn:aws:s3:::b", true, false},
		{[]string{"AK1", "alice"}, "s3:DeleteObject", "arn:aws:s3:::b/up/x", false, false},
		{[]string{"carol"}, "s3:ListBucket", "arn:aws:s3:::b", false, false},
		{nil, "s3:GetObject", "arn:aws:s3:::b/pub/secret1", true, true},
		{[]string{"AK1"}, "s3:DeleteObject", "arn:aws:s3:::b/pub/secret2", false, true},
	}
	for _, c := range cases {
		allow, deny := p.Evaluate(c.who, c.action, c.resource, nil)
		if allow != c.allow || deny != c.deny {
			t.Errorf("Evaluate(%v, %s, %s) = %v, %v; want %v, %v", c.who, c.action, c.resource, allow, deny, c.allow, c.deny)
		}
	}
	if !p.AllowsAction([]string{"bob"}, "s3:PutObject", nil) || p.AllowsAction(nil, "s3:PutObject", nil) {
		t.Error("AllowsAction does not follow the Allow statements")
	}
	for _, bad := range []string{
		`[]`,
		`{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]} {}`,
		`{"Statement":[{"Effect":"Allow","Principal":"me","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`,
		`{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:","Resource":"arn:aws:s3:::b/*"}]}`,
		`{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::bb/*"}]}`,
		`{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject"}]}`,
	} {
		if _, err := ParsePolicy("b", []byte(bad)); !errors.Is(err, ErrMalformedPolicy) {
			t.Errorf("ParsePolicy(%s) = %v, want ErrMalformedPolicy", bad, err)
		}
	}
}
