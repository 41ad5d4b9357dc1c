package sse

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"
)

// Large reads go through the read-ahead: whole objects, ranges that start
// and end inside segments and parts, and a tampered segment far in.
func TestLargeRangesReadAhead(t *testing.T) {
	dek := NewKey()
	parts := [][]byte{randomBytes(5*aheadSize + 12345), randomBytes(SegmentSize + 1), randomBytes(3 * aheadSize)}
	plain := bytes.Join(parts, nil)
	stored, m := encryptParts(t, dek, SegmentSize, parts...)
	size := int64(len(plain))
	for _, r := range [][2]int64{{0, size}, {1, size - 1}, {SegmentSize - 1, 2*aheadSize + 3}, {int64(len(parts[0])) - 7, aheadSize + 100}, {size - aheadSize - 1, aheadSize + 1}} {
		got, err := decrypt(m, dek, stored, r[0], r[1])
		if err != nil {
			t.Fatalf("range %d+%d: %v", r[0], r[1], err)
		}
		if !bytes.Equal(got, plain[r[0]:r[0]+r[1]]) {
			t.Fatalf("range %d+%d: %d bytes, differ from the plaintext", r[0], r[1], len(got))
		}
	}
	bad := bytes.Clone(stored)
	bad[3*aheadSize] ^= 1
	got, err := decrypt(m, dek, bad, 0, size)
	if !errors.Is(err, ErrAuth) || len(got) >= 3*aheadSize {
		t.Fatalf("a flipped bit at %d: %d bytes, err %v; want ErrAuth before it", 3*aheadSize, len(got), err)
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
