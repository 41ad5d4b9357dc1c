package chunk

import (
	"context"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/kelpfs/kelp/internal/aesgcm"
)

// Encryption at rest (see the package doc, "Encrypted chunks"): a chunk
// written with encryption on is stored as the AES-256-GCM sealing of its
// bytes under a key of its own, drawn at random for that one blob and kept
// only in the chunk's record (Chunk.CipherKey), never on a volume server.
//
// The blob is cut into segments of SegmentSize plaintext bytes, each sealed
// separately with the segment's index as nonce (the key is used for this
// blob only, so a nonce never repeats under a key); a segment is its
// ciphertext followed by its 16-byte tag. A range of the chunk is read by
// fetching and opening only the segments it touches, so a small range read
// of an 8 MiB chunk costs one or two 64 KiB segments, not the whole chunk.

// KeySize is the length of a chunk key (AES-256).
const KeySize = 32

// SegmentSize is the plaintext bytes per sealed segment of a blob.
const SegmentSize = 64 << 10

const tagSize = 16

const sealedSegment = SegmentSize + tagSize

// ErrDecrypt marks a sealed blob that does not open under its key: it was
// changed, cut short or is not the blob the record names.
var ErrDecrypt = errors.New("chunk: encrypted blob does not authenticate")

// NewKey draws a fresh random chunk key.
func NewKey() ([]byte, error) {
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("chunk: draw key: %w", err)
	}
	return k, nil
}

// SealedSize is the size of the blob that stores n plaintext bytes sealed.
func SealedSize(n int64) int64 {
	return n + (n+SegmentSize-1)/SegmentSize*tagSize
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("chunk: key of %d bytes, want %d", len(key), KeySize)
	}
	return aesgcm.New(key) // the same bytes as crypto/cipher's GCM, faster where the CPU has VAES
}

func segNonce(n *[12]byte, seg int64) []byte {
	binary.BigEndian.PutUint64(n[4:], uint64(seg))
	return n[:]
}

// Seal appends the sealed form of plain under key to dst and returns it.
func Seal(dst, key, plain []byte) ([]byte, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	need := int(SealedSize(int64(len(plain))))
	if cap(dst)-len(dst) < need {
		dst = append(make([]byte, 0, len(dst)+need), dst...)
	}
	var nonce [12]byte
	for seg := int64(0); len(plain) > 0; seg++ {
		n := min(len(plain), SegmentSize)
		dst = aead.Seal(dst, segNonce(&nonce, seg), plain[:n], nil)
		plain = plain[n:]
	}
	return dst, nil
}

// Unseal opens a whole sealed blob.
func Unseal(key, sealed []byte) ([]byte, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(sealed))
	var nonce [12]byte
	for seg := int64(0); len(sealed) > 0; seg++ {
		n := min(len(sealed), sealedSegment)
		if n <= tagSize {
			return nil, fmt.Errorf("%w: segment %d of %d bytes", ErrDecrypt, seg, n)
		}
		out, err = aead.Open(out, segNonce(&nonce, seg), sealed[:n], nil)
		if err != nil {
			return nil, fmt.Errorf("%w: segment %d", ErrDecrypt, seg)
		}
		sealed = sealed[n:]
	}
	return out, nil
}

// PutChunk stores data through p, sealed under a new key when encrypt is
// set; it returns the blob id and the key (nil when not encrypted).
func PutChunk(ctx context.Context, p Putter, data []byte, encrypt bool) (string, []byte, error) {
	if !encrypt {
		fid, err := p.Put(ctx, data)
		return fid, nil, err
	}
	key, err := NewKey()
	if err != nil {
		return "", nil, err
	}
	bp := sealBufs.Get().(*[]byte)
	defer sealBufs.Put(bp)
	sealed, err := Seal((*bp)[:0], key, data)
	if err != nil {
		return "", nil, err
	}
	*bp = sealed
	fid, err := p.Put(ctx, sealed)
	if err != nil {
		return "", nil, err
	}
	return fid, key, nil
}

var sealBufs = sync.Pool{New: func() any { return new([]byte) }}

var segBufs = sync.Pool{New: func() any { b := make([]byte, sealedSegment); return &b }}

// OpenChunk streams n plaintext bytes from offset off of a blob (n < 0: to
// its end). A blob with a key is sealed: only the segments the range
// touches are fetched, and each is authenticated before any of its bytes is
// returned. size is the blob's plaintext length when known (the chunk's
// Size), else -1; it lets a range end exactly at the blob's end.
func OpenChunk(ctx context.Context, o Opener, fid string, key []byte, size, off, n int64) (io.ReadCloser, error) {
	if off == 0 && n > 0 && n == size {
		// The whole blob: asked for without a range, which a volume server
		// answers from its plain-read path (no Range parsing, no 206).
		n = -1
	}
	if key == nil {
		return o.Open(ctx, fid, off, n)
	}
	aead, err := newAEAD(key)
	if err != nil {
		return nil, fmt.Errorf("chunk %s: %w", fid, err)
	}
	if n < 0 && size >= 0 {
		n = max(size-off, 0)
	}
	if n == 0 {
		return io.NopCloser(eofReader{}), nil
	}
	first := off / SegmentSize
	cOff := first * sealedSegment
	cLen := int64(-1)
	if n > 0 {
		last := (off + n - 1) / SegmentSize
		cLen = (last - first + 1) * sealedSegment
		if size >= 0 && last == (size-1)/SegmentSize {
			// The blob's last segment may be short.
			cLen = last*sealedSegment + (size - last*SegmentSize) + tagSize - cOff
		}
	}
	if off == 0 && n == size {
		cLen = -1 // the whole sealed blob, without a range
	}
	rc, err := o.Open(Authenticated(ctx), fid, cOff, cLen)
	if err != nil {
		return nil, err
	}
	bp := segBufs.Get().(*[]byte)
	return &openReader{rc: rc, aead: aead, seg: first, bp: bp, skip: off - first*SegmentSize, left: n}, nil
}

type openReader struct {
	rc    io.ReadCloser
	aead  cipher.AEAD
	seg   int64
	bp    *[]byte
	plain []byte // opened bytes not yet returned
	skip  int64  // bytes of the next opened segment before the range
	left  int64  // bytes still to return; < 0: to the blob's end
	err   error
	nonce [12]byte
}

func (r *openReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	if r.bp == nil {
		return 0, errors.New("chunk: read after close")
	}
	// While p has room for whole segments that are wanted whole, they are
	// read and opened in p, with no copy: the S3 gateway reads in large
	// buffers.
	n := 0
	for len(r.plain) == 0 && r.err == nil && r.skip == 0 && len(p)-n >= sealedSegment &&
		(r.left < 0 || r.left-int64(n) >= SegmentSize) {
		n += len(r.next(p[n : n+sealedSegment]))
	}
	if n > 0 {
		if r.left > 0 {
			r.left -= int64(n)
		}
		return n, nil
	}
	for len(r.plain) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		r.plain = r.next(*r.bp)
	}
	want := len(p)
	if r.left >= 0 {
		want = int(min(int64(want), r.left))
	}
	n = copy(p[:want], r.plain)
	r.plain = r.plain[n:]
	if r.left > 0 {
		r.left -= int64(n)
	}
	return n, nil
}

// next reads the next sealed segment into buf (sealedSegment bytes) and
// opens it there; it returns its plaintext past the bytes to skip, empty
// with r.err set when there is none.
func (r *openReader) next(buf []byte) []byte {
	n, err := io.ReadFull(r.rc, buf)
	switch {
	case err == io.EOF:
		if r.left > 0 {
			r.err = fmt.Errorf("chunk: sealed blob ended early: %w", io.ErrUnexpectedEOF)
		} else {
			r.err = io.EOF
		}
		return nil
	case err == io.ErrUnexpectedEOF:
		r.err = io.EOF // a short segment is the blob's last
	case err != nil:
		r.err = err
		return nil
	}
	if n <= tagSize {
		r.err = fmt.Errorf("%w: segment %d of %d bytes", ErrDecrypt, r.seg, n)
		return nil
	}
	plain, oerr := r.aead.Open(buf[:0], segNonce(&r.nonce, r.seg), buf[:n], nil)
	if oerr != nil {
		r.err = fmt.Errorf("%w: segment %d", ErrDecrypt, r.seg)
		return nil
	}
	r.seg++
	if r.skip > 0 {
		s := min(r.skip, int64(len(plain)))
		plain = plain[s:]
		r.skip -= s
	}
	if r.err == io.EOF && len(plain) == 0 && r.left > 0 {
		r.err = fmt.Errorf("chunk: sealed blob ended early: %w", io.ErrUnexpectedEOF)
	}
	return plain
}

func (r *openReader) Close() error {
	if r.bp != nil {
		segBufs.Put(r.bp)
		r.bp = nil
		r.plain = nil
	}
	return r.rc.Close()
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// KeyOf is a key as it came off the wire: nil when empty (protobuf does not
// tell an empty key from none).
func KeyOf(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}
