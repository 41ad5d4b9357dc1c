// Package ttl defines a time-to-live: a count and a unit, written "3m", "4h",
// "5d", "6w", "7M" (months), "8y"; the empty string means no expiry. It is stored
// in two bytes (count, unit) in volume superblocks and needles.
//
// It is a leaf package: anyone may import it.
package ttl

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ErrInvalid is returned (wrapped) for a string that is not a TTL.
var ErrInvalid = errors.New("ttl: invalid")

// TTL is a parsed time-to-live; the zero value means "never expires".
type TTL struct {
	Count uint8
	Unit  byte // one of "mhdwMy", 0 when unset
}

var unitDuration = map[byte]time.Duration{
	'm': time.Minute,
	'h': time.Hour,
	'd': 24 * time.Hour,
	'w': 7 * 24 * time.Hour,
	'M': 30 * 24 * time.Hour,
	'y': 365 * 24 * time.Hour,
}

// Parse reads "<count><unit>"; a bare number means minutes.
func Parse(s string) (TTL, error) {
	if s == "" {
		return TTL{}, nil
	}
	unit := s[len(s)-1]
	num := s[:len(s)-1]
	if unit >= '0' && unit <= '9' {
		unit, num = 'm', s
	}
	if _, ok := unitDuration[unit]; !ok {
		return TTL{}, fmt.Errorf("%w %q: unit must be one of m h d w M y", ErrInvalid, s)
	}
	n, err := strconv.ParseUint(num, 10, 8)
	if err != nil || n == 0 {
		return TTL{}, fmt.Errorf("%w %q: count must be 1 to 255", ErrInvalid, s)
	}
	return TTL{Count: uint8(n), Unit: unit}, nil
}

// FromBytes decodes the two-byte form; unknown units decode as no TTL.
func FromBytes(count, unit byte) TTL {
	if _, ok := unitDuration[unit]; !ok || count == 0 {
		return TTL{}
	}
	return TTL{Count: count, Unit: unit}
}

// Bytes encodes the two-byte form.
func (t TTL) Bytes() (count, unit byte) { return t.Count, t.Unit }

// IsZero reports whether the TTL never expires.
func (t TTL) IsZero() bool { return t.Count == 0 }

// Duration is the TTL's length; 0 when it never expires.
func (t TTL) Duration() time.Duration {
	if t.IsZero() {
		return 0
	}
	return time.Duration(t.Count) * unitDuration[t.Unit]
}

func (t TTL) String() string {
	if t.IsZero() {
		return ""
	}
	return strconv.Itoa(int(t.Count)) + string(t.Unit)
}
