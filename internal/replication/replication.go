// Package replication defines the replication code "XYZ": X copies in other data
// centers, Y copies in other racks of the same data center, Z copies on other
// servers of the same rack. "000" is a single copy, "001" two copies in one rack,
// "010" two racks, "100" two data centers, "200" three data centers.
//
// It is a leaf package: anyone may import it.
package replication

import (
	"errors"
	"fmt"
)

// ErrInvalid is returned (wrapped) for a string that is not a replication code.
var ErrInvalid = errors.New("replication: invalid code")

// Code is a parsed replication code.
type Code struct {
	DiffDataCenter uint8 // X
	DiffRack       uint8 // Y
	SameRack       uint8 // Z
}

// Parse reads "XYZ" with each digit 0-9; the empty string means "000".
func Parse(s string) (Code, error) {
	if s == "" {
		return Code{}, nil
	}
	if len(s) != 3 {
		return Code{}, fmt.Errorf("%w %q: want three digits XYZ", ErrInvalid, s)
	}
	var d [3]uint8
	for i := 0; i < 3; i++ {
		if s[i] < '0' || s[i] > '9' {
			return Code{}, fmt.Errorf("%w %q: want three digits XYZ", ErrInvalid, s)
		}
		d[i] = s[i] - '0'
	}
	return Code{d[0], d[1], d[2]}, nil
}

// FromByte decodes the one-byte form stored in volume superblocks (X*100+Y*10+Z).
func FromByte(b byte) Code {
	return Code{b / 100, (b / 10) % 10, b % 10}
}

// Byte encodes the code in one byte (X*100+Y*10+Z).
func (c Code) Byte() byte { return c.DiffDataCenter*100 + c.DiffRack*10 + c.SameRack }

// Copies is the total number of copies the code asks for.
func (c Code) Copies() int { return 1 + int(c.DiffDataCenter) + int(c.DiffRack) + int(c.SameRack) }

func (c Code) String() string {
	return fmt.Sprintf("%d%d%d", c.DiffDataCenter, c.DiffRack, c.SameRack)
}

// Must parses a code known to be valid, for tests and constants; it panics otherwise.
func Must(s string) Code {
	c, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return c
}
