package replication

import (
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	for _, s := range []string{"000", "001", "010", "100", "200", "222"} {
		c, err := Parse(s)
		if err != nil || c.String() != s || FromByte(c.Byte()) != c {
			t.Fatalf("Parse(%q) = %v, %v", s, c, err)
		}
	}
	if c, _ := Parse("210"); c.Copies() != 4 {
		t.Fatalf("210 copies = %d, want 4", c.Copies())
	}
	for _, s := range []string{"1", "0000", "00a", "-01"} {
		if _, err := Parse(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) err = %v", s, err)
		}
	}
}
