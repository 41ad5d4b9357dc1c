package sse

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"
)

func decryptAhead(m *Meta, dek, stored []byte, off, n int64) ([]byte, error) {
	d, err := NewDecrypter(m, dek, off, n, opener(stored, nil))
	if err != nil {
		return nil, err
	}
	d = ReadAhead(d, n)
	defer d.Close()
	return io.ReadAll(d)
}

// decryptPieces reads as S3's GET does: buffers of PieceSize, each filled
// with at least PieceSize-SegmentSize-TagSize bytes unless the end comes
// first.
func decryptPieces(m *Meta, dek, stored []byte, off, n int64) ([]byte, error) {
	d, err := NewDecrypter(m, dek, off, n, opener(stored, nil))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	var out []byte
	buf := make([]byte, PieceSize)
	for {
		k, err := io.ReadAtLeast(d, buf, PieceSize-SegmentSize-TagSize)
		out = append(out, buf[:k]...)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// Large reads, through the read-ahead and in pieces: whole objects, ranges
// that start and end inside segments and parts, and a tampered segment far
// in.
func TestLargeRangesReadAhead(t *testing.T) {
	dek := NewKey()
	parts := [][]byte{randomBytes(5*aheadSize + 12345), randomBytes(SegmentSize + 1), randomBytes(3 * aheadSize)}
	plain := bytes.Join(parts, nil)
	stored, m := encryptParts(t, dek, SegmentSize, parts...)
	size := int64(len(plain))
	for _, read := range []func(m *Meta, dek, stored []byte, off, n int64) ([]byte, error){decryptAhead, decryptPieces} {
		for _, r := range [][2]int64{{0, size}, {1, size - 1}, {SegmentSize - 1, 2*aheadSize + 3}, {int64(len(parts[0])) - 7, aheadSize + 100}, {size - aheadSize - 1, aheadSize + 1}} {
			got, err := read(m, dek, stored, r[0], r[1])
			if err != nil {
				t.Fatalf("range %d+%d: %v", r[0], r[1], err)
			}
			if !bytes.Equal(got, plain[r[0]:r[0]+r[1]]) {
				t.Fatalf("range %d+%d: %d bytes, differ from the plaintext", r[0], r[1], len(got))
			}
		}
		bad := bytes.Clone(stored)
		bad[3*aheadSize] ^= 1
		got, err := read(m, dek, bad, 0, size)
		if !errors.Is(err, ErrAuth) || len(got) >= 3*aheadSize {
			t.Fatalf("a flipped bit at %d: %d bytes, err %v; want ErrAuth before it", 3*aheadSize, len(got), err)
		}
	}
}

// Read in pieces of PieceSize from a segment boundary, a decrypter opens
// every whole segment in the caller's buffer: its own buffer is never made.
func TestPiecesOpenInPlace(t *testing.T) {
	dek := NewKey()
	plain := randomBytes(16 * SegmentSize)
	stored, m := encryptParts(t, dek, SegmentSize, plain)
	rc, err := NewDecrypter(m, dek, 0, int64(len(plain)), opener(stored, nil))
	if err != nil {
		t.Fatal(err)
	}
	d := rc.(*decrypter)
	buf := make([]byte, PieceSize)
	var got []byte
	for {
		n, err := io.ReadAtLeast(d, buf, PieceSize-SegmentSize-TagSize)
		got = append(got, buf[:n]...)
		if err != nil {
			break
		}
		if n != 4*SegmentSize {
			t.Fatalf("a piece of %d bytes, want %d", n, 4*SegmentSize)
		}
	}
	if !bytes.Equal(got, plain) || d.buf != nil {
		t.Fatalf("%d bytes (equal: %v); own buffer made: %v", len(got), bytes.Equal(got, plain), d.buf != nil)
	}
}

// signalReader tells when a read reaches past a position.
type signalReader struct {
	r     io.Reader
	pos   int64
	at    int64
	past  chan struct{}
	fired bool
}

func (s *signalReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.pos += int64(n)
	if s.pos > s.at && !s.fired {
		s.fired = true
		close(s.past)
	}
	return n, err
}

// The next piece is fetched and decrypted while the caller still holds
// the first one (it writes it to its client meanwhile); Close in the
// middle stops the goroutine and closes the stored stream.
func TestDecryptsAheadOfTheCaller(t *testing.T) {
	dek := NewKey()
	plain := randomBytes(4 * aheadSize)
	stored, m := encryptParts(t, dek, SegmentSize, plain)
	sig := &signalReader{r: bytes.NewReader(stored), at: aheadSize, past: make(chan struct{})}
	closed := make(chan struct{})
	d, err := NewDecrypter(m, dek, 0, int64(len(plain)), func(off, n int64) (io.ReadCloser, error) {
		return closeSignal{sig, closed}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	d = ReadAhead(d, int64(len(plain)))
	first := make([]byte, 1000)
	if _, err := io.ReadFull(d, first); err != nil || !bytes.Equal(first, plain[:1000]) {
		t.Fatalf("first bytes: %v", err)
	}
	select {
	case <-sig.past:
	case <-time.After(10 * time.Second):
		t.Fatal("the second piece was not read while the caller held the first")
	}
	d.Close()
	select {
	case <-closed:
	default:
		t.Fatal("Close did not close the stored stream")
	}
	if _, err := d.Read(first); err == nil {
		t.Fatal("a read after Close succeeded")
	}
}

type closeSignal struct {
	io.Reader
	closed chan struct{}
}

func (c closeSignal) Close() error { close(c.closed); return nil }
