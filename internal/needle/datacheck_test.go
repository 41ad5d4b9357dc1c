package needle

import (
	"math/rand/v2"
	"testing"
)

func TestCombineCRCMatchesOnePass(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range [][2]int{{0, 0}, {5, 0}, {0, 5}, {100, 1 << 20}, {4096, 65537}} {
		b := make([]byte, n[0]+n[1])
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		if got, want := CombineCRC(CRC(b[:n[0]]), CRC(b[n[0]:]), int64(n[1])), CRC(b); got != want {
			t.Fatalf("%v: combined %08x, one pass %08x", n, got, want)
		}
	}
}

func TestExtendCRC(t *testing.T) {
	for _, n := range []int{0, 100, combineMin - 1, combineMin, 1 << 20} {
		head, data := []byte("head of a record"), make([]byte, n)
		for i := range data {
			data[i] = byte(i * 7)
		}
		if got, want := ExtendCRC(CRC(head), CRC(data), data), CRC(append(head, data...)); got != want {
			t.Fatalf("%d bytes: %08x, want %08x", n, got, want)
		}
	}
}

func BenchmarkCombineCRC(b *testing.B) {
	for i := range b.N {
		CombineCRC(uint32(i), 0x12345678, 1<<20+int64(i&1023))
	}
}

func BenchmarkCRC1MiB(b *testing.B) {
	buf := make([]byte, 1<<20)
	b.SetBytes(int64(len(buf)))
	for range b.N {
		CRC(buf)
	}
}

// TestDataCheck checks a record made by AppendRecord piece by piece, and
// that a change to the head alone (which only the record's CRC covers) or to
// the data fails it.
func TestDataCheck(t *testing.T) {
	data := make([]byte, 3<<20+5)
	for i := range data {
		data[i] = byte(i * 13)
	}
	m := Meta{Key: 7, Cookie: 9, Name: "n", Pairs: []byte("k:v")}
	rec, err := AppendRecord(nil, &m, data)
	if err != nil {
		t.Fatal(err)
	}
	_, h, dataOff, _, _, err := ParseMeta(rec)
	if err != nil {
		t.Fatal(err)
	}
	wantData, wantRec := ParseTrailer(rec[HeaderSize+int(h.BodySize):])
	check := func(head, data []byte) bool {
		c := NewDataCheck(head, wantData, wantRec)
		for p := data; len(p) > 0; {
			n := min(len(p), 100_000)
			c.Add(p[:n])
			p = p[n:]
		}
		return c.Verify()
	}
	head := rec[:dataOff]
	if !check(head, data) {
		t.Fatal("an intact record fails the check")
	}
	badHead := append([]byte(nil), head...)
	badHead[len(badHead)-1] ^= 1
	if check(badHead, data) {
		t.Fatal("a changed head passes the check")
	}
	badData := append([]byte(nil), data...)
	badData[1<<20] ^= 0x40
	if check(head, badData) {
		t.Fatal("changed data passes the check")
	}
	if check(head, data[:len(data)-1]) {
		t.Fatal("short data passes the check")
	}
}
