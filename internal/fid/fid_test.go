package fid

import (
	"errors"
	"testing"
)

func TestParseRoundTrip(t *testing.T) {
	cases := []struct {
		in   string
		want FileID
	}{
		{"3,01637037d6", FileID{3, 0x01, 0x637037d6}},
		{"3,1637037d6", FileID{3, 0x1, 0x637037d6}},
		{"4294967295,ffffffffffffffff00000000", FileID{0xffffffff, ^uint64(0), 0}},
		{"7,ab12345678.jpg", FileID{7, 0xab, 0x12345678}},
	}
	for _, c := range cases {
		got, err := Parse(c.in)
		if err != nil || got != c.want {
			t.Fatalf("Parse(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
		again, err := Parse(got.String())
		if err != nil || again != got {
			t.Fatalf("round trip of %v gave %v, %v", got, again, err)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, s := range []string{"", ",", "3", "3,", "0,01637037d6", "x,01637037d6", "3,637037d6",
		"3,zz637037d6", "3,01637037dz", "3,1234567890123456789012345", "-1,01637037d6", "99999999999,01637037d6"} {
		if _, err := Parse(s); !errors.Is(err, ErrMalformed) {
			t.Errorf("Parse(%q) error = %v, want ErrMalformed", s, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"3,01637037d6", "1,100000000", "", "3,x", "0,0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(id.String())
		if err != nil || again != id {
			t.Fatalf("%q parsed to %v which does not round-trip: %v %v", s, id, again, err)
		}
	})
}
