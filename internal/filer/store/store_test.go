package store

import (
	"bytes"
	"errors"
	"testing"
)

func TestPrefixEnd(t *testing.T) {
	cases := []struct{ in, want []byte }{
		{[]byte("abc"), []byte("abd")},
		{[]byte{'a', 0xff}, []byte("b")},
		{[]byte{0x00}, []byte{0x01}},
		{[]byte{0xff, 0xff}, nil},
		{nil, nil},
	}
	for _, c := range cases {
		got := PrefixEnd(c.in)
		if !bytes.Equal(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("PrefixEnd(%x) = %x, want %x", c.in, got, c.want)
		}
	}
	in := []byte("ab")
	PrefixEnd(in)
	if string(in) != "ab" {
		t.Errorf("PrefixEnd changed its argument to %q", in)
	}
}

func TestCheck(t *testing.T) {
	if err := CheckKey(make([]byte, MaxKeySize)); err != nil {
		t.Errorf("max key: %v", err)
	}
	for _, k := range [][]byte{nil, {}, make([]byte, MaxKeySize+1)} {
		if err := CheckKey(k); !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckKey(%d bytes) = %v, want ErrInvalid", len(k), err)
		}
	}
	if err := CheckValue(nil); err != nil {
		t.Errorf("empty value: %v", err)
	}
	if err := CheckValue(make([]byte, MaxValueSize+1)); !errors.Is(err, ErrInvalid) {
		t.Errorf("large value: %v, want ErrInvalid", err)
	}
}

func TestSeqKey(t *testing.T) {
	a, b := SeqKey([]byte("log/"), 255), SeqKey([]byte("log/"), 256)
	if bytes.Compare(a, b) >= 0 {
		t.Errorf("SeqKey order: %x !< %x", a, b)
	}
	if n, err := SeqOf(b); err != nil || n != 256 {
		t.Errorf("SeqOf = %d, %v", n, err)
	}
	if _, err := SeqOf([]byte("short")); !errors.Is(err, ErrInvalid) {
		t.Errorf("SeqOf(short) = %v, want ErrInvalid", err)
	}
}

func TestEmptyRange(t *testing.T) {
	for _, c := range []struct {
		start, end string
		nilEnd     bool
		want       bool
	}{{"a", "b", false, false}, {"b", "a", false, true}, {"a", "a", false, true}, {"z", "", true, false}, {"", "", false, true}} {
		var end []byte
		if !c.nilEnd {
			end = []byte(c.end)
		}
		if got := EmptyRange([]byte(c.start), end); got != c.want {
			t.Errorf("EmptyRange(%q, %q nil=%v) = %v", c.start, c.end, c.nilEnd, got)
		}
	}
}
