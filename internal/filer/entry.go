package filer

import (
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/varenc"
)

// Entry is a directory, file or symlink. Entries returned by the Filer are
// the caller's to change; passing one back (UpdateEntry) stores it.
type Entry struct {
	Path   string      // clean absolute path
	Mode   os.FileMode // type bits (os.ModeDir, os.ModeSymlink) and permissions
	UID    uint32
	GID    uint32
	Mtime  time.Time // content last changed
	Ctime  time.Time // entry last changed (attributes, rename)
	Crtime time.Time // created
	Mime   string
	Size   int64  // file size; may exceed the chunks' span (a sparse tail)
	MD5    []byte // MD5 of the whole content when the filer saw it all written at once
	Target string // symlink target
	Meta   map[string]string
	Xattrs map[string][]byte
	Chunks []chunk.Chunk
}

// IsDir reports whether e is a directory.
func (e *Entry) IsDir() bool { return e.Mode.IsDir() }

// Name is the last path component ("" for the root).
func (e *Entry) Name() string {
	_, name := SplitPath(e.Path)
	return name
}

// ETag is the entity tag of a file's content, without quotes: the hex MD5
// of the content when known (every whole-file write; S3 clients expect
// it), else, for content assembled by range writes or appends, the hex MD5
// of the chunks' ETags (their FIDs where they have none) concatenated,
// followed by "-" and the chunk count, as S3 does for multipart objects.
// Every write stores new blobs under new FIDs, so it changes with the content.
func (e *Entry) ETag() string {
	if len(e.MD5) > 0 {
		return hex.EncodeToString(e.MD5)
	}
	if len(e.Chunks) == 1 && e.Chunks[0].Offset == 0 && e.Chunks[0].Size == e.Size && !e.Chunks[0].Manifest && e.Chunks[0].ETag != "" {
		return e.Chunks[0].ETag
	}
	h := md5.New()
	for _, c := range e.Chunks {
		if c.ETag != "" {
			h.Write([]byte(c.ETag))
		} else {
			h.Write([]byte(c.FID))
		}
	}
	return hex.EncodeToString(h.Sum(nil)) + "-" + strconv.Itoa(len(e.Chunks))
}

// Clone returns a deep copy of e.
func (e *Entry) Clone() *Entry {
	c := *e
	c.MD5 = slices.Clone(e.MD5)
	c.Meta = maps.Clone(e.Meta)
	if e.Xattrs != nil {
		c.Xattrs = make(map[string][]byte, len(e.Xattrs))
		for k, v := range e.Xattrs {
			c.Xattrs[k] = slices.Clone(v)
		}
	}
	c.Chunks = slices.Clone(e.Chunks)
	return &c
}

// rootEntry is the root's entry until its attributes are first changed
// (and stored): the root always exists.
func rootEntry() *Entry {
	return &Entry{Path: "/", Mode: os.ModeDir | 0o755}
}

// absentEntry is the answer for clean path p not found in the store.
func absentEntry(p string) (*Entry, error) {
	if p == "/" {
		return rootEntry(), nil
	}
	return nil, fmt.Errorf("%w: %s", ErrNotFound, p)
}

const entryVersion = 1

// encodeEntry writes e without its path (see the package doc).
func encodeEntry(e *Entry) []byte {
	b := make([]byte, 0, 64+len(e.Chunks)*48)
	b = append(b, entryVersion)
	b = binary.AppendUvarint(b, uint64(e.Mode))
	b = binary.AppendUvarint(b, uint64(e.UID))
	b = binary.AppendUvarint(b, uint64(e.GID))
	b = binary.AppendVarint(b, unixNano(e.Mtime))
	b = binary.AppendVarint(b, unixNano(e.Ctime))
	b = binary.AppendVarint(b, unixNano(e.Crtime))
	b = varenc.AppendBytes(b, []byte(e.Mime))
	b = binary.AppendUvarint(b, uint64(e.Size))
	b = varenc.AppendBytes(b, e.MD5)
	b = varenc.AppendBytes(b, []byte(e.Target))
	b = binary.AppendUvarint(b, uint64(len(e.Meta)))
	for _, k := range slices.Sorted(maps.Keys(e.Meta)) {
		b = varenc.AppendBytes(b, []byte(k))
		b = varenc.AppendBytes(b, []byte(e.Meta[k]))
	}
	b = binary.AppendUvarint(b, uint64(len(e.Xattrs)))
	for _, k := range slices.Sorted(maps.Keys(e.Xattrs)) {
		b = varenc.AppendBytes(b, []byte(k))
		b = varenc.AppendBytes(b, e.Xattrs[k])
	}
	return chunk.AppendList(b, e.Chunks)
}

// decodeEntry reads an entry stored at path p.
func decodeEntry(p string, b []byte) (*Entry, error) {
	if len(b) == 0 || b[0] != entryVersion {
		return nil, fmt.Errorf("%w: entry %s: unknown version", ErrCorrupt, p)
	}
	d := varenc.NewDecoder(b[1:], ErrCorrupt)
	e := &Entry{Path: p}
	e.Mode = os.FileMode(d.Uvarint())
	e.UID = uint32(d.Uvarint())
	e.GID = uint32(d.Uvarint())
	e.Mtime = fromNano(d.Varint())
	e.Ctime = fromNano(d.Varint())
	e.Crtime = fromNano(d.Varint())
	e.Mime = string(d.Bytes())
	e.Size = int64(d.Uvarint())
	if md := d.Bytes(); len(md) > 0 {
		e.MD5 = md
	}
	e.Target = string(d.Bytes())
	if n := d.Count(2); n > 0 {
		e.Meta = make(map[string]string, n)
		for i := 0; i < n && d.Err() == nil; i++ {
			k := string(d.Bytes())
			e.Meta[k] = string(d.Bytes())
		}
	}
	if n := d.Count(2); n > 0 {
		e.Xattrs = make(map[string][]byte, n)
		for i := 0; i < n && d.Err() == nil; i++ {
			k := string(d.Bytes())
			e.Xattrs[k] = d.Bytes()
		}
	}
	if d.Err() != nil {
		return nil, fmt.Errorf("entry %s: %w", p, d.Err())
	}
	if e.Size < 0 {
		return nil, fmt.Errorf("%w: entry %s: negative size", ErrCorrupt, p)
	}
	cs, rest, err := chunk.ReadList(d.Rest())
	if err != nil {
		return nil, fmt.Errorf("%w: entry %s: %v", ErrCorrupt, p, err)
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: entry %s: %d trailing bytes", ErrCorrupt, p, len(rest))
	}
	e.Chunks = cs
	return e, nil
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}
