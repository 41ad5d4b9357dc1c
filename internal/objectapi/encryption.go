package objectapi

import (
	"context"
	"encoding/json"
	"io"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/filer"
	"github.com/kelpfs/kelp/internal/sse"
)

// Server-side encryption: the layer encrypts content on its way to the
// blob layer (after the MD5 and checksum of the plaintext are taken) and
// decrypts it on the way out; the format is internal/sse's. Which key
// seals the data key, and whether a request may use it, is the gateway's
// decision: it hands the layer an Encryption for writes and a KeyFunc for
// reads.
const (
	xaSSE     = "s3.sse"     // an encrypted object's or upload's sse.Meta (JSON)
	xaSSEPart = "s3.ssepart" // an encrypted upload part's sse.Part (JSON)
)

// Encryption is how a new object (or upload) is encrypted: Meta carries
// the kind and the sealed data key, Key the data key itself (never stored).
type Encryption struct {
	Meta *sse.Meta
	Key  []byte
}

// KeyFunc returns the data key of an object or upload encrypted as m, or
// an error when the request may not use it (SSE-C key missing or wrong, a
// disabled KMS key). It is called with m nil for an object that is not
// encrypted, so that it can refuse encryption headers sent for one.
type KeyFunc func(m *sse.Meta) ([]byte, error)

// Keys give a request's data keys.
type Keys struct {
	Object KeyFunc // the object read, or the upload a part is written to
	Source KeyFunc // the source of a copy
}

// dataKey asks f for the key of an object or upload encrypted as m (nil:
// not encrypted).
func dataKey(f KeyFunc, m *sse.Meta) ([]byte, error) {
	if f == nil {
		if m == nil {
			return nil, nil
		}
		return nil, errorf(ErrInvalidRequest, "the object is encrypted and no key was given")
	}
	k, err := f(m)
	if err == nil && m != nil && len(k) != sse.KeySize {
		return nil, errorf(ErrInvalidRequest, "no data key for an encrypted object")
	}
	return k, err
}

// sseMeta returns the encryption of an entry, nil when it is not encrypted.
func sseMeta(e *filer.Entry) *sse.Meta {
	v := e.Xattrs[xaSSE]
	if len(v) == 0 {
		return nil
	}
	m, err := sse.Parse(v)
	if err != nil {
		// A damaged attribute: treat as encrypted with nothing readable,
		// never as plaintext.
		return &sse.Meta{Version: -1}
	}
	return m
}

// encryptingPart is one part (or single PUT) being encrypted by store.
type encryptingPart struct {
	key  []byte
	part sse.Part
	seg  int
	// plainETag: the ETag is the MD5 of the plaintext (SSE-S3), not of
	// the stored bytes.
	plainETag bool
}

func newEncryptingPart(m *sse.Meta, key []byte, n int) *encryptingPart {
	return &encryptingPart{key: key, part: sse.NewPart(n), seg: m.Segment, plainETag: m.Kind == sse.KindS3}
}

// decode reads a part's stored sse.Part.
func partEncryption(e *filer.Entry) (sse.Part, bool) {
	var p sse.Part
	v := e.Xattrs[xaSSEPart]
	if len(v) == 0 || json.Unmarshal(v, &p) != nil {
		return p, false
	}
	return p, true
}

func encodePart(p sse.Part) []byte {
	b, _ := json.Marshal(p)
	return b
}

// openPlain returns a reader of n plaintext bytes of an object from off,
// decrypting when it is encrypted (key from f). With ahead, a large
// encrypted object is decrypted in a goroutine ahead of the reader
// (sse.ReadAhead): for callers that do not read ahead themselves. GET
// does, in buffers the decrypter opens segments in (sse.PieceSize), so
// it asks for none: the read-ahead's copy of every byte is saved.
func (l *Layer) openPlain(ctx context.Context, e *filer.Entry, oi ObjectInfo, f KeyFunc, off, n int64, ahead bool) (io.ReadCloser, error) {
	key, err := dataKey(f, oi.SSE)
	if err != nil {
		return nil, err
	}
	if oi.SSE == nil {
		return l.open(ctx, e, off, n)
	}
	// Every byte of the ciphertext is checked against its segment's tag.
	d, err := sse.NewDecrypter(oi.SSE, key, off, n, func(coff, cn int64) (io.ReadCloser, error) {
		return l.open(chunk.Authenticated(ctx), e, coff, cn)
	})
	if err != nil || !ahead {
		return d, err
	}
	return sse.ReadAhead(d, n), nil
}
