package s3bench

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
)

// templateSize is the period of the generated contents; a prime shift per
// object makes neighbouring objects differ everywhere, not only in the stamp.
const (
	templateSize = 1 << 20
	objectShift  = 104729
	stampSize    = 16
)

// content generates the bytes of every object of a run. It is read-only
// after newContent and safe for concurrent use.
type content struct {
	template []byte
	nonce    uint64
}

func newContent(seed uint64) *content {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	c := &content{template: make([]byte, templateSize), nonce: rng.Uint64()}
	for i := 0; i < templateSize; i += 8 {
		binary.LittleEndian.PutUint64(c.template[i:], rng.Uint64())
	}
	return c
}

// fill writes object i's bytes at offset off into p.
func (c *content) fill(i int, off int64, p []byte) {
	pos := (off + int64(i)*objectShift) % templateSize
	for n := 0; n < len(p); {
		m := copy(p[n:], c.template[pos:])
		n += m
		pos = 0
	}
	if off < stampSize {
		stamp := c.stamp(i)
		copy(p, stamp[off:])
	}
}

// stamp is the head of object i: its number and the run's nonce.
func (c *content) stamp(i int) (s [stampSize]byte) {
	binary.LittleEndian.PutUint64(s[:], uint64(i))
	binary.LittleEndian.PutUint64(s[8:], c.nonce)
	return s
}

// object is an io.ReadSeeker and io.ReaderAt over object i's bytes, so
// that the SDK learns the length by seeking and the upload manager reads
// parts as sections without buffering them.
type object struct {
	c    *content
	i    int
	size int64
	pos  int64
}

func (o *object) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("s3bench: negative offset")
	}
	if off >= o.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), o.size-off))
	o.c.fill(o.i, off, p[:n])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (o *object) Read(p []byte) (int, error) {
	if o.pos >= o.size {
		return 0, io.EOF
	}
	n, _ := o.ReadAt(p, o.pos)
	o.pos += int64(n)
	return n, nil
}

func (o *object) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += o.pos
	case io.SeekEnd:
		offset += o.size
	default:
		return 0, fmt.Errorf("s3bench: bad whence %d", whence)
	}
	if offset < 0 {
		return 0, errors.New("s3bench: seek before start")
	}
	o.pos = offset
	return offset, nil
}

// errMismatch marks a GET whose bytes or length differ from what was put.
var errMismatch = errors.New("s3bench: read back different bytes")

// verify reads r to EOF through buf and checks that it is exactly object
// i's bytes [off, off+n). The bytes are compared where the template holds
// them (matches), not generated into a second buffer first: a GET costs
// the client one copy (from the socket), as it would any client. buf is
// at least the HTTP transport's read buffer, so that reads go straight
// from the socket into it.
func (c *content) verify(r io.Reader, i int, off, n int64, buf []byte) error {
	var seen int64
	for {
		m, err := io.ReadFull(r, buf)
		if m > 0 {
			if seen+int64(m) > n {
				return fmt.Errorf("%w: object %d range at %d is longer than %d bytes", errMismatch, i, off, n)
			}
			if !c.matches(i, off+seen, buf[:m]) {
				return fmt.Errorf("%w: object %d differs in [%d, %d)", errMismatch, i, off+seen, off+seen+int64(m))
			}
			seen += int64(m)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return fmt.Errorf("s3bench: reading object %d: %w", i, err)
		}
	}
	if seen != n {
		return fmt.Errorf("%w: object %d range at %d has %d bytes, want %d", errMismatch, i, off, seen, n)
	}
	return nil
}

// matches reports whether p is object i's bytes at offset off (what fill
// would write), comparing in place against the stamp and the template.
func (c *content) matches(i int, off int64, p []byte) bool {
	if off < stampSize {
		stamp := c.stamp(i)
		k := min(int64(len(p)), stampSize-off)
		if !bytes.Equal(p[:k], stamp[off:off+k]) {
			return false
		}
		p, off = p[k:], off+k
	}
	pos := (off + int64(i)*objectShift) % templateSize
	for len(p) > 0 {
		m := min(int64(len(p)), templateSize-pos)
		if !bytes.Equal(p[:m], c.template[pos:pos+m]) {
			return false
		}
		p, pos = p[m:], 0
	}
	return true
}
