package varenc

import (
	"encoding/binary"
	"errors"
	"testing"
)

var errCorrupt = errors.New("test: corrupt")

func TestRoundTrip(t *testing.T) {
	b := binary.AppendUvarint(nil, 300)
	b = binary.AppendVarint(b, -7)
	b = append(b, 9)
	b = AppendString(b, "héllo")
	b = AppendBytes(b, []byte{0, 1, 2})
	b = binary.AppendUvarint(b, 2)
	b = append(b, 'x', 'y')
	d := NewDecoder(b, errCorrupt)
	if d.Uvarint() != 300 || d.Varint() != -7 || d.Byte() != 9 || d.String() != "héllo" ||
		string(d.Bytes()) != "\x00\x01\x02" || d.Count(1) != 2 || string(d.Rest()) != "xy" || d.Err() != nil {
		t.Fatalf("round trip failed: %v", d.Err())
	}
}

func TestTruncatedInputIsAnErrorNotAPanic(t *testing.T) {
	full := AppendString(AppendBytes(binary.AppendUvarint(nil, 1<<40), []byte("abc")), "defg")
	for cut := 0; cut < len(full); cut++ {
		d := NewDecoder(full[:cut], errCorrupt)
		d.Uvarint()
		d.Bytes()
		_ = d.String()
		if !errors.Is(d.Err(), errCorrupt) {
			t.Fatalf("cut at %d: err %v, want the corruption mark", cut, d.Err())
		}
	}
	if d := NewDecoder(binary.AppendUvarint(nil, 1000), errCorrupt); d.Count(1) != 0 || !errors.Is(d.Err(), errCorrupt) {
		t.Fatal("a count larger than the input was accepted")
	}
}
