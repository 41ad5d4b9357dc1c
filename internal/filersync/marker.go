package filersync

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// marker is what the sync stores (xattr XattrOrigin) on every entry it
// writes: which cluster's version the entry copies. Encoded as
// "origin mtimeNs size attrs ctimeNs":
//   - mtimeNs and size name the origin's data version;
//   - attrs is attrDigest of the attributes the sync wrote;
//   - ctimeNs is when the origin's version last changed: the clock that
//     orders attribute changes made on both sites.
//
// A marker is valid for an entry while the entry still holds exactly what
// the sync wrote (same mtime, size and attribute digest): any local change
// since invalidates it. Markers written before attributes were synced
// have only the first three fields; they vouch for the data only.
type marker struct {
	origin      string
	mtime, size int64
	attrs       string // "" in a three-field marker
	ctime       int64
}

func parseMarker(e *filerpb.Entry) (marker, bool) {
	f := strings.Fields(string(e.Xattrs[XattrOrigin]))
	if len(f) != 3 && len(f) != 5 {
		return marker{}, false
	}
	m := marker{origin: f[0]}
	var err1, err2, err3 error
	m.mtime, err1 = strconv.ParseInt(f[1], 10, 64)
	m.size, err2 = strconv.ParseInt(f[2], 10, 64)
	if len(f) == 5 {
		m.attrs = f[3]
		m.ctime, err3 = strconv.ParseInt(f[4], 10, 64)
	}
	return m, err1 == nil && err2 == nil && err3 == nil
}

func (m marker) encode() []byte {
	return []byte(m.origin + " " + strconv.FormatInt(m.mtime, 10) + " " + strconv.FormatInt(m.size, 10) +
		" " + m.attrs + " " + strconv.FormatInt(m.ctime, 10))
}

// holdsData: e's data is still the origin's version the marker names.
func (m marker) holdsData(e *filerpb.Entry) bool {
	return e.IsDir || (m.mtime == e.MtimeNs && m.size == e.Size)
}

// unchanged: e is exactly what the sync wrote, attributes included.
func (m marker) unchanged(e *filerpb.Entry) bool {
	return m.attrs != "" && m.holdsData(e) && m.attrs == attrDigest(e)
}

// markerOf returns e's marker when it is still valid for e's data.
func markerOf(e *filerpb.Entry) (marker, bool) {
	m, ok := parseMarker(e)
	if !ok || !m.holdsData(e) {
		return marker{}, false
	}
	return m, true
}

// attrDigest digests the attributes the sync carries between sites:
// permission and special mode bits, owner, MIME type, user metadata,
// xattrs other than the marker, and a file's mtime. A directory's mtime is
// left out: each site moves it as its own children change.
func attrDigest(e *filerpb.Entry) string {
	h := sha256.New()
	var b []byte
	b = binary.AppendUvarint(b, uint64(os.FileMode(e.Mode)&^os.ModeType))
	b = binary.AppendUvarint(b, uint64(e.Uid))
	b = binary.AppendUvarint(b, uint64(e.Gid))
	if !e.IsDir {
		b = binary.AppendVarint(b, e.MtimeNs)
	}
	b = appendString(b, e.Mime)
	for _, k := range slices.Sorted(maps.Keys(e.UserMetadata)) {
		b = appendString(appendString(b, k), e.UserMetadata[k])
	}
	b = append(b, 0xff) // user metadata ends, xattrs begin
	for _, k := range slices.Sorted(maps.Keys(e.Xattrs)) {
		if k != XattrOrigin {
			b = appendString(appendString(b, k), string(e.Xattrs[k]))
		}
	}
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// attrClock is when e's attributes last changed and on which cluster:
// the origin's time for an unchanged copy, else e's own ctime.
func attrClock(e *filerpb.Entry, ownID string) (int64, string) {
	if m, ok := parseMarker(e); ok && m.unchanged(e) {
		return m.ctime, m.origin
	}
	return e.CtimeNs, ownID
}

// newMarker is the marker for a copy of se (of cluster srcID) carrying
// attributes ne.
func newMarker(srcID string, se, ne *filerpb.Entry) []byte {
	ctime, _ := attrClock(se, srcID)
	return marker{origin: srcID, mtime: se.MtimeNs, size: se.Size, attrs: attrDigest(ne), ctime: ctime}.encode()
}

// fromDst: e is a copy the sync wrote from cluster dstID, unchanged since.
func fromDst(e *filerpb.Entry, dstID string) bool {
	m, ok := parseMarker(e)
	return ok && m.origin == dstID && m.unchanged(e)
}

// sameData: de (on dst) holds the data se (on src, cluster srcID) holds:
// one is an unchanged-data copy of the other, or they have equal type,
// size and content hash. Attributes are compared apart (syncAttributes).
func sameData(se *filerpb.Entry, srcID string, de *filerpb.Entry, dstID string) bool {
	if se.IsDir != de.IsDir || se.SymlinkTarget != de.SymlinkTarget || os.FileMode(se.Mode).Type() != os.FileMode(de.Mode).Type() {
		return false
	}
	if se.IsDir {
		return true
	}
	if m, ok := markerOf(de); ok && m.origin == srcID && m.mtime == se.MtimeNs && m.size == se.Size {
		return true
	}
	if m, ok := markerOf(se); ok && m.origin == dstID && m.mtime == de.MtimeNs && m.size == de.Size {
		return true
	}
	if se.Size != de.Size {
		return false
	}
	if len(se.Md5) > 0 && len(de.Md5) > 0 {
		return bytes.Equal(se.Md5, de.Md5)
	}
	return se.Etag != "" && se.Etag == de.Etag
}
