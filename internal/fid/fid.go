// Package fid defines Kelp's file id: "<volume id>,<needle key hex><cookie 8 hex>",
// e.g. "3,01637037d6". The key is the needle's 64-bit key within its volume, written
// in lower-case hex without leading zeros; the cookie is 32 random bits written as
// exactly 8 hex digits, so file ids cannot be guessed from their neighbours.
//
// It is a leaf package: anyone may import it.
package fid

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrMalformed is returned (wrapped) for any string that is not a file id.
var ErrMalformed = errors.New("fid: malformed file id")

// FileID names one needle in the cluster.
type FileID struct {
	Volume uint32
	Key    uint64
	Cookie uint32
}

// String formats the id in its canonical form.
func (f FileID) String() string {
	return strconv.FormatUint(uint64(f.Volume), 10) + "," + f.KeyCookie()
}

// KeyCookie formats the part after the comma.
func (f FileID) KeyCookie() string {
	return strconv.FormatUint(f.Key, 16) + fmt.Sprintf("%08x", f.Cookie)
}

// Parse reads a file id. It accepts an optional file extension or name suffix
// after the id ("3,01637037d6.jpg") because clients append one for content type
// detection; everything from the first '.' or '/' after the comma is ignored.
func Parse(s string) (FileID, error) {
	comma := strings.IndexByte(s, ',')
	if comma <= 0 {
		return FileID{}, fmt.Errorf("%w %q: want <volume>,<key><cookie>", ErrMalformed, s)
	}
	vol, err := ParseVolumeID(s[:comma])
	if err != nil {
		return FileID{}, fmt.Errorf("%w %q: %v", ErrMalformed, s, err)
	}
	kc := s[comma+1:]
	if i := strings.IndexAny(kc, "./_"); i >= 0 {
		kc = kc[:i]
	}
	key, cookie, err := ParseKeyCookie(kc)
	if err != nil {
		return FileID{}, fmt.Errorf("%w %q: %v", ErrMalformed, s, err)
	}
	return FileID{Volume: vol, Key: key, Cookie: cookie}, nil
}

// ParseVolumeID reads a decimal volume id; 0 is not a valid volume.
func ParseVolumeID(s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("%w: bad volume id %q", ErrMalformed, s)
	}
	return uint32(v), nil
}

// ParseKeyCookie reads "<key hex><cookie 8 hex>".
func ParseKeyCookie(s string) (key uint64, cookie uint32, err error) {
	if len(s) <= 8 || len(s) > 16+8 {
		return 0, 0, fmt.Errorf("%w: key and cookie %q must be 9 to 24 hex digits", ErrMalformed, s)
	}
	k, err := strconv.ParseUint(s[:len(s)-8], 16, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: bad key in %q", ErrMalformed, s)
	}
	c, err := strconv.ParseUint(s[len(s)-8:], 16, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: bad cookie in %q", ErrMalformed, s)
	}
	return k, uint32(c), nil
}
