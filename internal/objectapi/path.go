package objectapi

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"unicode/utf8"

	"github.com/kelpfs/kelp/internal/filer"
)

// MaxKeyLen is S3's limit on key length in bytes.
const MaxKeyLen = 1024

func errorf(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", kind, fmt.Sprintf(format, args...))
}

// ValidBucketName applies S3's rules for new buckets: 3 to 63 characters
// of lower-case letters, digits, '.' and '-', beginning and ending with a
// letter or digit, no "..", not an IP address, not the reserved prefixes
// "xn--" and "sthree-" or suffixes "-s3alias" and "--ol-s3".
func ValidBucketName(name string) error {
	if len(name) < 3 || len(name) > 63 {
		return errorf(ErrInvalidBucketName, "%q must be 3 to 63 characters long", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return errorf(ErrInvalidBucketName, "%q: only lower-case letters, digits, '.' and '-' are allowed", name)
		}
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	if !alnum(name[0]) || !alnum(name[len(name)-1]) {
		return errorf(ErrInvalidBucketName, "%q must begin and end with a letter or digit", name)
	}
	if strings.Contains(name, "..") || strings.Contains(name, ".-") || strings.Contains(name, "-.") {
		return errorf(ErrInvalidBucketName, "%q has adjacent periods or dashes", name)
	}
	if net.ParseIP(name) != nil {
		return errorf(ErrInvalidBucketName, "%q is formatted as an IP address", name)
	}
	for _, p := range []string{"xn--", "sthree-"} {
		if strings.HasPrefix(name, p) {
			return errorf(ErrInvalidBucketName, "%q: the prefix %q is reserved", name, p)
		}
	}
	for _, s := range []string{"-s3alias", "--ol-s3"} {
		if strings.HasSuffix(name, s) {
			return errorf(ErrInvalidBucketName, "%q: the suffix %q is reserved", name, s)
		}
	}
	return nil
}

// bucketLookupName checks a bucket name loosely, for buckets that already
// exist: anything that is one path component not starting with '.'.
func bucketLookupName(name string) error {
	if name == "" || name[0] == '.' || strings.ContainsAny(name, "/\x00") || len(name) > 255 {
		return errorf(ErrNoSuchBucket, "%q", name)
	}
	return nil
}

func (l *Layer) bucketPath(bucket string) string { return l.root + "/" + bucket }

// objectPath maps a key to its path; dirObject is set for keys ending in '/'.
func (l *Layer) objectPath(bucket, key string) (p string, dirObject bool, err error) {
	if err := checkKey(key); err != nil {
		return "", false, err
	}
	dirObject = strings.HasSuffix(key, "/")
	return l.bucketPath(bucket) + "/" + strings.TrimSuffix(key, "/"), dirObject, nil
}

// checkKey accepts the keys a path can represent (see the package doc).
func checkKey(key string) error {
	switch {
	case key == "":
		return errorf(ErrInvalidKey, "empty key")
	case len(key) > MaxKeyLen:
		return errorf(ErrKeyTooLong, "key of %d bytes exceeds %d", len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		return errorf(ErrUnsupportedKey, "key is not valid UTF-8")
	case strings.IndexByte(key, 0) >= 0:
		return errorf(ErrUnsupportedKey, "NUL byte in key")
	}
	parts := strings.Split(strings.TrimSuffix(key, "/"), "/")
	for _, name := range parts {
		switch {
		case name == "":
			return errorf(ErrUnsupportedKey, "key %q has an empty path component", key)
		case name == "." || name == "..":
			return errorf(ErrUnsupportedKey, "key %q has a %q component", key, name)
		case len(name) > filer.MaxNameLen:
			return errorf(ErrUnsupportedKey, "key %q has a component over %d bytes", key, filer.MaxNameLen)
		}
	}
	return nil
}

// keyOf is the key of an entry below bucket directory bdir.
func keyOf(bdir string, e *filer.Entry, dirObject bool) string {
	k, ok := strings.CutPrefix(e.Path, bdir+"/")
	if !ok {
		return string(e.Xattrs[xaKey]) // a version kept apart (shadow.go, versioning.go)
	}
	if dirObject {
		k += "/"
	}
	return k
}

// nsErr turns namespace errors about an object path into this package's.
func nsErr(err error, key string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, filer.ErrNotFound):
		return errorf(ErrNoSuchKey, "%q", key)
	case errors.Is(err, filer.ErrNotDir), errors.Is(err, filer.ErrIsDir), errors.Is(err, filer.ErrExists):
		return fmt.Errorf("%w: %q: %w", ErrKeyConflict, key, err)
	case errors.Is(err, filer.ErrInvalidPath):
		return fmt.Errorf("%w: %q: %w", ErrUnsupportedKey, key, err)
	}
	return err
}
