package chunk

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/kelpfs/kelp/internal/varenc"
	"io"
)

// ErrCorrupt marks an undecodable chunk list or manifest.
var ErrCorrupt = errors.New("chunk: corrupt chunk list")

// ErrNotFound is what a Blobs implementation wraps for a missing blob, so
// that garbage collection can treat it as already deleted.
var ErrNotFound = errors.New("chunk: blob not found")

// Chunk is one blob of a file's content, placed at Offset in the file.
type Chunk struct {
	FID    string // blob id, e.g. "3,01637037d6"
	Offset int64  // position of the blob's first byte in the file
	Size   int64  // bytes in the blob (for a manifest: the span it covers)
	Mtime  int64  // unix nanoseconds when written
	// ETag is the hex MD5 of the blob's bytes when it was computed anyway
	// (a file of one chunk, whose MD5 is the file's); "" otherwise, since
	// hashing every chunk of a large stream a second time would double the
	// MD5 work of a large upload. The blob's FID identifies it as well.
	ETag     string
	Manifest bool // the blob is an encoded chunk list (see Pack)
	// CipherKey is the AES-256 key the blob is sealed under (see crypt.go),
	// nil for a blob stored in the clear. It lives only in this record.
	CipherKey []byte
}

// End is the file position just past the chunk.
func (c Chunk) End() int64 { return c.Offset + c.Size }

// Putter stores a blob and returns its id. data is only read during the
// call. Safe for concurrent use.
type Putter interface {
	Put(ctx context.Context, data []byte) (fid string, err error)
}

// Opener streams n bytes of blob fid from offset off (n < 0: to its end).
// The caller closes the reader. A missing blob wraps ErrNotFound.
type Opener interface {
	Open(ctx context.Context, fid string, off, n int64) (io.ReadCloser, error)
}

// Blobs is the whole blob layer the filer needs. Delete of a missing blob
// returns an error wrapping ErrNotFound.
type Blobs interface {
	Putter
	Opener
	Delete(ctx context.Context, fid string) error
}

// TotalSize is the end of the furthest chunk: the smallest file size that
// holds every chunk.
func TotalSize(cs []Chunk) int64 {
	var n int64
	for _, c := range cs {
		n = max(n, c.End())
	}
	return n
}

const listVersion = 1

// AppendList appends the encoding of cs to b (see the package doc).
func AppendList(b []byte, cs []Chunk) []byte {
	b = append(b, listVersion)
	b = binary.AppendUvarint(b, uint64(len(cs)))
	for _, c := range cs {
		b = varenc.AppendString(b, c.FID)
		b = binary.AppendVarint(b, c.Offset)
		b = binary.AppendUvarint(b, uint64(c.Size))
		b = binary.AppendVarint(b, c.Mtime)
		b = varenc.AppendString(b, c.ETag)
		var flags byte
		if c.Manifest {
			flags |= 1
		}
		if c.CipherKey != nil {
			flags |= 2
		}
		b = append(b, flags)
		if c.CipherKey != nil {
			b = varenc.AppendString(b, string(c.CipherKey))
		}
	}
	return b
}

// ReadList decodes a list written by AppendList from the start of b and
// returns it with the bytes that follow it.
func ReadList(b []byte) ([]Chunk, []byte, error) {
	if len(b) == 0 {
		return nil, nil, fmt.Errorf("%w: empty", ErrCorrupt)
	}
	if b[0] != listVersion {
		return nil, nil, fmt.Errorf("%w: version %d", ErrCorrupt, b[0])
	}
	d := varenc.NewDecoder(b[1:], ErrCorrupt)
	n := d.Uvarint()
	// Each chunk takes at least 6 bytes: refuse counts the input cannot hold
	// before allocating for them.
	if d.Err() == nil && n > uint64(len(d.Rest()))/6 {
		return nil, nil, fmt.Errorf("%w: %d chunks in %d bytes", ErrCorrupt, n, len(d.Rest()))
	}
	var cs []Chunk
	if n > 0 {
		cs = make([]Chunk, 0, n)
	}
	for i := uint64(0); i < n && d.Err() == nil; i++ {
		c := Chunk{FID: d.String(), Offset: d.Varint()}
		size := d.Uvarint()
		c.Mtime = d.Varint()
		c.ETag = d.String()
		flags := d.Byte()
		if size > 1<<62 || c.Offset < 0 || flags&^3 != 0 {
			d.Fail(fmt.Errorf("%w: bad chunk", ErrCorrupt))
		}
		if flags&2 != 0 {
			if k := d.String(); len(k) == KeySize {
				c.CipherKey = []byte(k)
			} else if d.Err() == nil {
				d.Fail(fmt.Errorf("%w: chunk key of %d bytes", ErrCorrupt, len(k)))
			}
		}
		c.Size = int64(size)
		c.Manifest = flags&1 != 0
		cs = append(cs, c)
	}
	if d.Err() != nil {
		return nil, nil, d.Err()
	}
	return cs, d.Rest(), nil
}

// Equal reports whether a and b are the same chunk record.
func Equal(a, b Chunk) bool {
	return a.FID == b.FID && a.Offset == b.Offset && a.Size == b.Size && a.Mtime == b.Mtime &&
		a.ETag == b.ETag && a.Manifest == b.Manifest && string(a.CipherKey) == string(b.CipherKey)
}
