package filer

import (
	"fmt"
	"strings"
)

// MaxNameLen bounds one path component. It is S3's key limit, not POSIX's
// NAME_MAX (255): an S3 key without '/' is one name. POSIX views (FUSE,
// WebDAV) refuse longer names themselves.
const MaxNameLen = 1024

// MaxPathLen bounds a whole path so that its key ("d" + path + 0x00) fits
// store.MaxKeySize with room to spare.
const MaxPathLen = 2000

// CleanPath checks p against the path rules and returns its canonical form:
// leading '/', no trailing or repeated '/'. Errors wrap ErrInvalidPath.
func CleanPath(p string) (string, error) {
	if p == "" || p[0] != '/' {
		return "", fmt.Errorf("%w: %q is not absolute", ErrInvalidPath, p)
	}
	if len(p) > MaxPathLen {
		return "", fmt.Errorf("%w: path of %d bytes exceeds %d", ErrInvalidPath, len(p), MaxPathLen)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%w: NUL byte in path", ErrInvalidPath)
	}
	var b strings.Builder
	b.Grow(len(p))
	for _, name := range strings.Split(p, "/") {
		switch {
		case name == "":
			continue
		case name == "." || name == "..":
			return "", fmt.Errorf("%w: %q component in %q", ErrInvalidPath, name, p)
		case len(name) > MaxNameLen:
			return "", fmt.Errorf("%w: name of %d bytes exceeds %d", ErrInvalidPath, len(name), MaxNameLen)
		}
		b.WriteByte('/')
		b.WriteString(name)
	}
	if b.Len() == 0 {
		return "/", nil
	}
	return b.String(), nil
}

// SplitPath returns a clean path's parent directory and name; the root's
// are "" and "".
func SplitPath(p string) (dir, name string) {
	if p == "/" {
		return "", ""
	}
	i := strings.LastIndexByte(p, '/')
	if i == 0 {
		return "/", p[1:]
	}
	return p[:i], p[i+1:]
}

// JoinPath joins a clean directory path and a name.
func JoinPath(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// IsAncestor reports whether clean path a is a proper ancestor of clean path p.
func IsAncestor(a, p string) bool {
	if a == "/" {
		return p != "/"
	}
	return len(p) > len(a) && p[len(a)] == '/' && p[:len(a)] == a
}

// Key prefixes; see the package doc.
const (
	prefixEntry = 'd'
	prefixEvent = 'e'
	// prefixGCLegacy is the garbage queue of filers before GCDelay, keyed
	// by fid alone; it is drained, never written.
	prefixGCLegacy = 'g'
	prefixGCQueue  = 'G'
	// prefixRoot is the root's own key: its attributes, once changed.
	prefixRoot = 'r'
)

var seqKey = []byte{'s'}

// entryKey is the store key of a clean path.
func entryKey(p string) []byte {
	if p == "/" {
		return []byte{prefixRoot}
	}
	dir, name := SplitPath(p)
	k := make([]byte, 0, 2+len(dir)+len(name))
	k = append(k, prefixEntry)
	k = append(k, dir...)
	k = append(k, 0)
	return append(k, name...)
}

// childPrefix is the key prefix of the entries directly in directory dir.
func childPrefix(dir string) []byte {
	k := make([]byte, 0, 2+len(dir))
	k = append(k, prefixEntry)
	k = append(k, dir...)
	return append(k, 0)
}

// deepPrefix is the key prefix of the entries below dir's children; dir is
// not the root.
func deepPrefix(dir string) []byte {
	k := make([]byte, 0, 2+len(dir))
	k = append(k, prefixEntry)
	k = append(k, dir...)
	return append(k, '/')
}

// pathOfKey is the inverse of entryKey.
func pathOfKey(k []byte) (string, error) {
	if len(k) < 3 || k[0] != prefixEntry {
		return "", fmt.Errorf("%w: bad entry key %q", ErrCorrupt, k)
	}
	s := string(k[1:])
	i := strings.IndexByte(s, 0)
	if i < 0 {
		return "", fmt.Errorf("%w: bad entry key %q", ErrCorrupt, k)
	}
	return JoinPath(s[:i], s[i+1:]), nil
}

// HardLinkXattr marks an entry as one name of a hard-linked file (the FUSE
// view makes them; the filer has no links of its own): its value is the
// link group's id, and the content lives at HardLinkContentPath(id).
const HardLinkXattr = "kelp.hardlink"

// HardLinkContentPath is where the content of hard-link group id lives.
func HardLinkContentPath(id string) string { return "/.kelp/links/" + id }
