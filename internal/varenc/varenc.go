// Package varenc encodes the compact binary records Kelp keeps in metadata
// stores (filer entries, events, chunk lists): unsigned and signed varints,
// single bytes, and length-prefixed strings and byte slices.
//
// A Decoder remembers its first error, so a record is decoded field by field
// and checked once at the end; every read past the input is an error that
// wraps the caller's corruption mark, never a panic.
//
// It is a leaf package: anyone may import it.
package varenc

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// AppendString appends s with its length.
func AppendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// AppendBytes appends v with its length.
func AppendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// Decoder reads a record. It is not safe for concurrent use.
type Decoder struct {
	b       []byte
	err     error
	corrupt error
}

// NewDecoder reads b; errors wrap corrupt (the caller's corruption mark).
func NewDecoder(b []byte, corrupt error) *Decoder { return &Decoder{b: b, corrupt: corrupt} }

// Err is the first error met, or nil.
func (d *Decoder) Err() error { return d.err }

// Rest is the input not read yet (nil after an error).
func (d *Decoder) Rest() []byte { return d.b }

// Fail records a decoding error found by the caller, unless one is recorded already.
func (d *Decoder) Fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *Decoder) fail(what string) { d.Fail(fmt.Errorf("%w: %s", d.corrupt, what)) }

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("truncated uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// Varint reads a signed varint.
func (d *Decoder) Varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("truncated varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// Byte reads one byte.
func (d *Decoder) Byte() byte {
	if len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// String reads a length-prefixed string.
func (d *Decoder) String() string {
	n := d.Uvarint()
	if n > uint64(len(d.b)) {
		d.fail("truncated string")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// Bytes reads a length-prefixed byte slice into a new slice.
func (d *Decoder) Bytes() []byte {
	n := d.Uvarint()
	if n > uint64(len(d.b)) {
		d.fail("truncated bytes")
		return nil
	}
	v := slices.Clone(d.b[:n])
	d.b = d.b[n:]
	return v
}

// Count reads the number of items that follow, each taking at least
// minSize bytes, refusing counts the rest of the input cannot hold (so a
// corrupt count cannot make the caller allocate without bound).
func (d *Decoder) Count(minSize int) int {
	n := d.Uvarint()
	if n > uint64(len(d.b))/uint64(max(minSize, 1)) {
		d.fail(fmt.Sprintf("count %d too large for %d bytes", n, len(d.b)))
		return 0
	}
	return int(n)
}
