package backup

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"os"

	"golang.org/x/sys/unix"

	"github.com/kelpfs/kelp/internal/filersync"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// Attrs are what a backup keeps of an entry besides its type, size, mtime
// and content, so a restore brings them back: the filer's mode (a
// directory's copy in a backup directory stays writable by its owner, so
// the file system's own mode can differ), owner, MIME type, user metadata
// and xattrs (not filer.sync's marker, which names the source cluster).
type Attrs struct {
	Mode   uint32            `json:"mode"`
	UID    uint32            `json:"uid,omitempty"`
	GID    uint32            `json:"gid,omitempty"`
	Mime   string            `json:"mime,omitempty"`
	Meta   map[string]string `json:"meta,omitempty"`
	Xattrs map[string][]byte `json:"xattrs,omitempty"`
}

func attrsOf(e *filerpb.Entry) *Attrs {
	a := &Attrs{Mode: e.Mode, UID: e.Uid, GID: e.Gid, Mime: e.Mime}
	if e.IsDir {
		a.Mode |= uint32(os.ModeDir)
	}
	if len(e.UserMetadata) > 0 {
		a.Meta = maps.Clone(e.UserMetadata)
	}
	for k, v := range e.Xattrs {
		if k == filersync.XattrOrigin {
			continue
		}
		if a.Xattrs == nil {
			a.Xattrs = map[string][]byte{}
		}
		a.Xattrs[k] = v
	}
	return a
}

func (a *Attrs) equal(b *Attrs) bool {
	return a.Mode == b.Mode && a.UID == b.UID && a.GID == b.GID && a.Mime == b.Mime &&
		maps.Equal(a.Meta, b.Meta) && maps.EqualFunc(a.Xattrs, b.Xattrs, bytes.Equal)
}

// apply gives a restored entry the attributes.
func (a *Attrs) apply(e *filerpb.Entry) {
	if a == nil {
		return
	}
	e.Mode, e.Uid, e.Gid, e.Mime = a.Mode&^uint32(os.ModeDir), a.UID, a.GID, a.Mime
	e.UserMetadata, e.Xattrs = a.Meta, a.Xattrs
}

func (a *Attrs) encode() []byte {
	b, _ := json.Marshal(a)
	return b
}

func decodeAttrs(b []byte) *Attrs {
	var a Attrs
	if len(b) == 0 || json.Unmarshal(b, &a) != nil {
		return nil
	}
	return &a
}

// In a backup directory the attributes are the xattr attrsXattr of each
// file and directory (not of symlinks: Linux refuses user xattrs there).
// On a file system without user xattrs they are not kept; Stat then
// reports none and they are not compared.
const attrsXattr = "user.kelp.attrs"

func setLocalAttrs(p string, m Meta) error {
	if m.Attrs == nil || m.Mode&os.ModeSymlink != 0 {
		return nil
	}
	err := unix.Setxattr(p, attrsXattr, m.Attrs.encode(), 0)
	if errors.Is(err, unix.ENOTSUP) {
		return nil
	}
	return err
}

func localAttrs(p string) *Attrs {
	buf := make([]byte, 4096)
	for {
		n, err := unix.Getxattr(p, attrsXattr, buf)
		if errors.Is(err, unix.ERANGE) {
			buf = make([]byte, 2*len(buf))
			continue
		}
		if err != nil {
			return nil
		}
		return decodeAttrs(buf[:n])
	}
}

// In S3 they are user metadata (base64 of the JSON), when they fit the
// 2 KB S3 allows for all of an object's user metadata; larger ones (long
// xattrs) are not kept.
const (
	metaAttrs    = "kelp-attrs"
	maxMetaAttrs = 1500
)

func attrsToMeta(md map[string]string, a *Attrs) {
	if a == nil {
		return
	}
	if s := base64.RawURLEncoding.EncodeToString(a.encode()); len(s) <= maxMetaAttrs {
		md[metaAttrs] = s
	}
}

func attrsFromMeta(md map[string]string) *Attrs {
	b, err := base64.RawURLEncoding.DecodeString(md[metaAttrs])
	if err != nil {
		return nil
	}
	return decodeAttrs(b)
}
