package sigv4

import "testing"

func TestURIEncode(t *testing.T) {
	for _, c := range []struct {
		in        string
		keepSlash bool
		want      string
	}{
		{"/a b+c~d_e-f.g/ü", true, "/a%20b%2Bc~d_e-f.g/%C3%BC"},
		{"/a b+c~d/ü", false, "%2Fa%20b%2Bc~d%2F%C3%BC"},
		{"!*'();:@&=$,?#[]%", true, "%21%2A%27%28%29%3B%3A%40%26%3D%24%2C%3F%23%5B%5D%25"},
		{"", true, ""},
	} {
		if got := uriEncode(c.in, c.keepSlash); got != c.want {
			t.Errorf("uriEncode(%q, %v) = %q, want %q", c.in, c.keepSlash, got, c.want)
		}
	}
}

func TestCanonicalQueries(t *testing.T) {
	for _, c := range []struct {
		raw, skip string
		want      []string
	}{
		{"", "", []string{""}},
		{"b=2&a=1&a=0&c&d=", "", []string{"a=0&a=1&b=2&c=&d="}},
		{"prefix=a%20b&delimiter=%2F", "", []string{"delimiter=%2F&prefix=a%20b"}},
		// A literal '+' is a plus sign (re-encoded), the wire form is the fallback.
		{"prefix=a+b", "", []string{"prefix=a%2Bb", "prefix=a+b"}},
		// Lower-case escapes and over-escaped characters are normalised.
		{"k=%7e%2d", "", []string{"k=~-", "k=%7e%2d"}},
		{"X-Amz-Signature=abc&X-Amz-Date=1", "X-Amz-Signature", []string{"X-Amz-Date=1"}},
		{"a=%zz", "", []string{"a=%25zz", "a=%zz"}},
	} {
		got := canonicalQueries(c.raw, c.skip)
		if len(got) != len(c.want) {
			t.Errorf("canonicalQueries(%q) = %q, want %q", c.raw, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("canonicalQueries(%q) = %q, want %q", c.raw, got, c.want)
			}
		}
	}
}
