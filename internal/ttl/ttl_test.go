package ttl

import (
	"errors"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	cases := map[string]time.Duration{"": 0, "3m": 3 * time.Minute, "5": 5 * time.Minute, "2d": 48 * time.Hour, "1y": 365 * 24 * time.Hour}
	for s, want := range cases {
		got, err := Parse(s)
		if err != nil || got.Duration() != want {
			t.Fatalf("Parse(%q) = %v, %v", s, got, err)
		}
		if s != "5" && got.String() != s {
			t.Fatalf("String() = %q, want %q", got.String(), s)
		}
		if FromBytes(got.Bytes()) != got {
			t.Fatalf("bytes round trip of %q failed", s)
		}
	}
	for _, s := range []string{"x", "0m", "300d", "3q", "-1h"} {
		if _, err := Parse(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) err = %v", s, err)
		}
	}
}
