package sse

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
)

// encryptParts encrypts each plaintext as a part of one object with a small
// segment size, and returns the stored bytes and the metadata.
func encryptParts(t *testing.T, dek []byte, seg int, plains ...[]byte) ([]byte, *Meta) {
	t.Helper()
	m := NewMeta(KindS3)
	m.Segment = seg
	var stored []byte
	for i, pt := range plains {
		p := NewPart(i + 1)
		e, err := NewEncrypter(bytes.NewReader(pt), dek, p, seg, hint(len(pt)))
		if err != nil {
			t.Fatal(err)
		}
		ct, err := io.ReadAll(e)
		if err != nil {
			t.Fatal(err)
		}
		if e.Size() != int64(len(pt)) || int64(len(ct)) != CipherSize(int64(len(pt)), seg) {
			t.Fatalf("part %d: plaintext %d (read %d), ciphertext %d, want %d", i+1, len(pt), e.Size(), len(ct), CipherSize(int64(len(pt)), seg))
		}
		p.Size = e.Size()
		m.Parts = append(m.Parts, p)
		stored = append(stored, ct...)
	}
	return stored, m
}

// hint gives encryptParts' encrypters alternately no size hint, the right
// one and one too small, which must all give the same result.
var hints int

func hint(n int) int64 {
	hints++
	switch hints % 3 {
	case 0:
		return -1
	case 1:
		return int64(n)
	}
	return int64(n / 2)
}

func opener(stored []byte, reads *[][2]int64) Opener {
	return func(off, n int64) (io.ReadCloser, error) {
		if reads != nil {
			*reads = append(*reads, [2]int64{off, n})
		}
		return io.NopCloser(bytes.NewReader(stored[off : off+n])), nil
	}
}

func decrypt(m *Meta, dek, stored []byte, off, n int64) ([]byte, error) {
	d, err := NewDecrypter(m, dek, off, n, opener(stored, nil))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return io.ReadAll(d)
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.IntN(256))
	}
	return b
}

// TestRangesAtSegmentBoundaries decrypts every range whose ends are at or
// next to a segment or part boundary, over parts of awkward sizes
// (empty, one byte, exactly a segment, a segment and one byte).
func TestRangesAtSegmentBoundaries(t *testing.T) {
	const seg = 16
	dek := NewKey()
	parts := [][]byte{randomBytes(seg), randomBytes(0), randomBytes(2*seg + 1), randomBytes(1), randomBytes(3 * seg)}
	plain := bytes.Join(parts, nil)
	stored, m := encryptParts(t, dek, seg, parts...)
	if m.PlainSize() != int64(len(plain)) || m.StoredSize() != int64(len(stored)) {
		t.Fatalf("sizes: plain %d/%d stored %d/%d", m.PlainSize(), len(plain), m.StoredSize(), len(stored))
	}
	var points []int64
	for i := int64(0); i <= int64(len(plain)); i++ {
		if r := i % seg; r == 0 || r == 1 || r == seg-1 {
			points = append(points, i)
		}
	}
	points = append(points, int64(len(plain)))
	for _, a := range points {
		for _, b := range points {
			if b < a {
				continue
			}
			got, err := decrypt(m, dek, stored, a, b-a)
			if err != nil {
				t.Fatalf("range %d-%d: %v", a, b, err)
			}
			if !bytes.Equal(got, plain[a:b]) {
				t.Fatalf("range %d-%d: got %d bytes, differ from the plaintext", a, b, len(got))
			}
		}
	}
}

// TestRangeReadsOnlyItsSegments checks that a small range fetches one
// segment's worth of stored bytes, not the object.
func TestRangeReadsOnlyItsSegments(t *testing.T) {
	dek := NewKey()
	plain := randomBytes(10 * SegmentSize)
	stored, m := encryptParts(t, dek, SegmentSize, plain)
	var reads [][2]int64
	d, err := NewDecrypter(m, dek, 5*SegmentSize+10, 100, opener(stored, &reads))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(d)
	if err != nil || !bytes.Equal(got, plain[5*SegmentSize+10:5*SegmentSize+110]) {
		t.Fatalf("range read: %v", err)
	}
	want := [2]int64{5 * (SegmentSize + TagSize), SegmentSize + TagSize}
	if len(reads) != 1 || reads[0] != want {
		t.Fatalf("stored reads %v, want [%v]", reads, want)
	}
}

func TestTamperedCiphertextFails(t *testing.T) {
	const seg = 32
	dek := NewKey()
	plain := randomBytes(5*seg + 7)
	stored, m := encryptParts(t, dek, seg, plain)
	for _, at := range []int{0, seg - 1, seg + TagSize, len(stored) - 1} {
		bad := bytes.Clone(stored)
		bad[at] ^= 1
		if _, err := decrypt(m, dek, bad, 0, int64(len(plain))); !errors.Is(err, ErrAuth) {
			t.Errorf("a flipped bit at %d: err %v, want ErrAuth", at, err)
		}
	}
	// Swapping two whole segments keeps every tag valid for its own data.
	sz := seg + TagSize
	swapped := bytes.Clone(stored)
	copy(swapped[0:sz], stored[sz:2*sz])
	copy(swapped[sz:2*sz], stored[0:sz])
	if _, err := decrypt(m, dek, swapped, 0, int64(len(plain))); !errors.Is(err, ErrAuth) {
		t.Errorf("swapped segments: err %v, want ErrAuth", err)
	}
	// A wrong key.
	if _, err := decrypt(m, NewKey(), stored, 0, int64(len(plain))); !errors.Is(err, ErrAuth) {
		t.Errorf("wrong key: err %v, want ErrAuth", err)
	}
}

// TestTruncatedPartFails: a part cut after a whole segment must not pass
// for a shorter part (the final flag is authenticated).
func TestTruncatedPartFails(t *testing.T) {
	const seg = 32
	dek := NewKey()
	plain := randomBytes(3 * seg)
	stored, m := encryptParts(t, dek, seg, plain)
	m.Parts[0].Size = 2 * seg
	if _, err := decrypt(m, dek, stored[:2*(seg+TagSize)], 0, 2*seg); !errors.Is(err, ErrAuth) {
		t.Fatalf("truncated part: err %v, want ErrAuth", err)
	}
}

// TestPartsCannotMove: the parts' stored bytes exchanged along with their
// nonces still fail, since the part number is authenticated.
func TestPartsCannotMove(t *testing.T) {
	const seg = 32
	dek := NewKey()
	a, b := randomBytes(seg), randomBytes(seg)
	stored, m := encryptParts(t, dek, seg, a, b)
	sz := seg + TagSize
	moved := append(bytes.Clone(stored[sz:]), stored[:sz]...)
	m.Parts[0].Nonce, m.Parts[1].Nonce = m.Parts[1].Nonce, m.Parts[0].Nonce
	if _, err := decrypt(m, dek, moved, 0, 2*seg); !errors.Is(err, ErrAuth) {
		t.Fatalf("moved parts: err %v, want ErrAuth", err)
	}
}

func TestSealKey(t *testing.T) {
	kek, key := NewKey(), NewKey()
	sealed, err := SealKey(kek, key, []byte("ctx"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := OpenKey(kek, sealed, []byte("ctx")); err != nil || !bytes.Equal(got, key) {
		t.Fatalf("OpenKey: %v", err)
	}
	if _, err := OpenKey(kek, sealed, []byte("other")); !errors.Is(err, ErrAuth) {
		t.Fatalf("another context: %v, want ErrAuth", err)
	}
	if _, err := OpenKey(NewKey(), sealed, []byte("ctx")); !errors.Is(err, ErrAuth) {
		t.Fatalf("another key: %v, want ErrAuth", err)
	}
	m := NewMeta(KindC)
	m.SetCustomerKey(key)
	if !m.CustomerKeyMatches(key) || m.CustomerKeyMatches(kek) {
		t.Fatal("CustomerKeyMatches")
	}
	if bytes.Contains(m.Marshal(), key) {
		t.Fatal("the customer key is in the metadata")
	}
}

func BenchmarkEncrypt1MiB(b *testing.B) {
	dek, plain := NewKey(), randomBytes(1<<20)
	b.SetBytes(int64(len(plain)))
	for b.Loop() {
		e, _ := NewEncrypter(bytes.NewReader(plain), dek, NewPart(1), SegmentSize, int64(len(plain)))
		io.Copy(io.Discard, e)
	}
}

func BenchmarkDecrypt1MiB(b *testing.B) {
	dek := NewKey()
	plain := randomBytes(1 << 20)
	e, _ := NewEncrypter(bytes.NewReader(plain), dek, NewPart(1), SegmentSize, int64(len(plain)))
	stored, _ := io.ReadAll(e)
	m := NewMeta(KindS3)
	m.Parts = []Part{{Number: 1, Size: int64(len(plain)), Nonce: e.part.Nonce}}
	b.SetBytes(int64(len(plain)))
	for b.Loop() {
		d, _ := NewDecrypter(m, dek, 0, int64(len(plain)), opener(stored, nil))
		io.Copy(io.Discard, d)
	}
}

// BenchmarkDecrypt1MiBRuns reads as the S3 gateway does: into a buffer of
// sixteen segments and more, so that whole segments are opened in place.
func BenchmarkDecrypt1MiBRuns(b *testing.B) {
	dek := NewKey()
	plain := randomBytes(4 << 20)
	e, _ := NewEncrypter(bytes.NewReader(plain), dek, NewPart(1), SegmentSize, int64(len(plain)))
	stored, _ := io.ReadAll(e)
	m := NewMeta(KindS3)
	m.Parts = []Part{{Number: 1, Size: int64(len(plain)), Nonce: e.part.Nonce}}
	buf := make([]byte, 17*(SegmentSize+TagSize))
	b.SetBytes(int64(len(plain)))
	for b.Loop() {
		d, _ := NewDecrypter(m, dek, 0, int64(len(plain)), opener(stored, nil))
		for {
			if _, err := d.Read(buf); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
		d.Close()
	}
}

// TestReadSizes reads ciphertext and plaintext both a byte at a time and
// in buffers larger than a segment (sealed and opened in place): the same
// bytes either way.
func TestReadSizes(t *testing.T) {
	const seg = 64
	dek := NewKey()
	plain := randomBytes(5*seg + 3)
	p := NewPart(1)
	readWith := func(r io.Reader, small bool) []byte {
		var out []byte
		buf := make([]byte, 3*seg)
		if small {
			r = iotest.OneByteReader(r)
		}
		for {
			n, err := r.Read(buf)
			out = append(out, buf[:n]...)
			if err == io.EOF {
				return out
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	var stored [2][]byte
	for i, small := range []bool{true, false} {
		e, err := NewEncrypter(bytes.NewReader(plain), dek, p, seg, -1)
		if err != nil {
			t.Fatal(err)
		}
		stored[i] = readWith(e, small)
	}
	if !bytes.Equal(stored[0], stored[1]) {
		t.Fatal("the ciphertext depends on the reader's buffer size")
	}
	p.Size = int64(len(plain))
	m := &Meta{Version: 1, Kind: KindS3, Segment: seg, Parts: []Part{p}}
	for _, small := range []bool{true, false} {
		for _, off := range []int64{0, 1, seg} {
			d, err := NewDecrypter(m, dek, off, int64(len(plain))-off, opener(stored[0], nil))
			if err != nil {
				t.Fatal(err)
			}
			if got := readWith(d, small); !bytes.Equal(got, plain[off:]) {
				t.Fatalf("small reads %v, offset %d: plaintext differs", small, off)
			}
		}
	}
}

// countingReader counts the reads of a stored body.
type countingReader struct {
	r     io.Reader
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) { c.reads++; return c.r.Read(p) }
func (c *countingReader) Close() error               { return nil }

// TestSegmentsReadWholeInPlace checks that a buffer with room for several
// whole segments gets them opened in place, each with one read of the
// stored body (a fetch, or a hand-off to a volume server in process) and
// none with more, over parts of every shape and with buffers of every size
// around a segment's multiples.
func TestSegmentsReadWholeInPlace(t *testing.T) {
	const seg = 64
	dek := NewKey()
	parts := [][]byte{randomBytes(8 * seg), randomBytes(3*seg + 5), randomBytes(seg), randomBytes(7)}
	plain := bytes.Join(parts, nil)
	stored, m := encryptParts(t, dek, seg, parts...)
	for size := 1; size <= 5*(seg+TagSize)+3; size++ {
		for _, off := range []int64{0, 3, seg, 8*seg + 1} {
			var body *countingReader
			d, err := NewDecrypter(m, dek, off, int64(len(plain))-off, func(o, n int64) (io.ReadCloser, error) {
				body = &countingReader{r: bytes.NewReader(stored[o : o+n])}
				return body, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			buf := make([]byte, size)
			for {
				n, err := d.Read(buf)
				got = append(got, buf[:n]...)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("buffer %d, offset %d: %v", size, off, err)
				}
			}
			if !bytes.Equal(got, plain[off:]) {
				t.Fatalf("buffer %d, offset %d: plaintext differs", size, off)
			}
			if size == 4*(seg+TagSize) && off == 0 {
				// 8 + 4 + 1 + 1 segments, a read each.
				if body.reads != 14 {
					t.Fatalf("%d reads of the stored body, want 14", body.reads)
				}
			}
		}
	}
}
