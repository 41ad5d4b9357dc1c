package sse

import (
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/kelpfs/kelp/internal/aesgcm"
)

// SegmentSize is the plaintext size of a segment (the last of a part is
// shorter).
const SegmentSize = 64 << 10

// TagSize is what AES-GCM adds to each segment.
const TagSize = 16

// KeySize is the size of data keys and key encryption keys (AES-256).
const KeySize = 32

const nonceSize = 12

// Kind is the kind of server-side encryption, as S3 names it in
// x-amz-server-side-encryption (SSE-C has no name there).
type Kind string

const (
	KindC   Kind = "SSE-C"   // customer-provided key
	KindS3  Kind = "AES256"  // keys managed by the store
	KindKMS Kind = "aws:kms" // a key of the key service
)

// ErrAuth is returned when a ciphertext or a sealed key does not
// authenticate: a wrong key, or data that was altered.
var ErrAuth = errors.New("sse: message authentication failed (wrong key or altered data)")

// Part is the encryption of one part (a single PUT is part 1).
type Part struct {
	Number int    `json:"n"`
	Size   int64  `json:"s"`  // plaintext bytes
	Nonce  []byte `json:"iv"` // 12-byte nonce base
}

// Meta is what is stored with an encrypted object.
type Meta struct {
	Version   int    `json:"v"`
	Kind      Kind   `json:"kind"`
	Segment   int    `json:"seg"`
	SealedKey []byte `json:"dek"` // the data key, sealed (SealKey)
	// KeyID is the KMS key (SSE-KMS) whose key sealed the data key, or
	// sealed the bucket key when SealedBucketKey is set.
	KeyID string `json:"kid,omitempty"`
	// Context is the SSE-KMS encryption context as canonical JSON; it is
	// the AAD of the sealing by the KMS key.
	Context         string `json:"ctx,omitempty"`
	BucketKey       bool   `json:"bk,omitempty"`
	SealedBucketKey []byte `json:"bkey,omitempty"`
	// KeyMAC is HMAC-SHA256(Salt, customer key) for SSE-C.
	KeyMAC []byte `json:"mac,omitempty"`
	Salt   []byte `json:"salt,omitempty"`
	Parts  []Part `json:"parts,omitempty"`
}

// Marshal encodes m for storage.
func (m *Meta) Marshal() []byte {
	b, _ := json.Marshal(m)
	return b
}

// Parse decodes a stored Meta.
func Parse(b []byte) (*Meta, error) {
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("sse: bad metadata: %w", err)
	}
	if m.Version != 1 || m.Segment <= 0 {
		return nil, fmt.Errorf("sse: unknown metadata version %d (segment %d)", m.Version, m.Segment)
	}
	return &m, nil
}

// maxPart is the size of the largest part.
func (m *Meta) maxPart() int64 {
	var n int64
	for _, p := range m.Parts {
		n = max(n, p.Size)
	}
	return n
}

// PlainSize is the object's size as clients see it.
func (m *Meta) PlainSize() int64 {
	var n int64
	for _, p := range m.Parts {
		n += p.Size
	}
	return n
}

// NewMeta returns the metadata of a new object or upload: a version, kind
// and segment size; the caller sets the sealed key and the rest.
func NewMeta(kind Kind) *Meta { return &Meta{Version: 1, Kind: kind, Segment: SegmentSize} }

// NewKey returns a random 256-bit key.
func NewKey() []byte { return random(KeySize) }

// NewPart returns part n with a fresh random nonce base.
func NewPart(n int) Part { return Part{Number: n, Nonce: random(nonceSize)} }

func random(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("sse: no randomness: " + err.Error()) // crypto/rand never fails on Linux
	}
	return b
}

// segments is how many segments a part of size plaintext bytes has.
func segments(size int64, seg int) int64 {
	if size == 0 {
		return 1
	}
	return (size + int64(seg) - 1) / int64(seg)
}

// CipherSize is the stored size of a part of size plaintext bytes.
func CipherSize(size int64, seg int) int64 { return size + segments(size, seg)*TagSize }

// StoredSize is the stored size of a whole object.
func (m *Meta) StoredSize() int64 {
	var n int64
	for _, p := range m.Parts {
		n += CipherSize(p.Size, m.Segment)
	}
	return n
}

func newGCM(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("sse: key of %d bytes, want %d", len(key), KeySize)
	}
	return aesgcm.New(key) // the same bytes as crypto/cipher's GCM, faster where the CPU has VAES
}

// segNonce and segAAD bind a segment to its part and position.
func segNonce(dst, base []byte, i uint64) []byte {
	dst = append(dst[:0], base...)
	var ib [8]byte
	binary.BigEndian.PutUint64(ib[:], i)
	for j := range 8 {
		dst[4+j] ^= ib[j]
	}
	return dst
}

const aadPrefix = "kelp-sse1"

func segAAD(dst []byte, part int, i uint64, final bool) []byte {
	dst = append(dst[:0], aadPrefix...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(part))
	dst = binary.BigEndian.AppendUint64(dst, i)
	if final {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// SealKey seals key under kek with aad (random nonce, prepended).
func SealKey(kek, key, aad []byte) ([]byte, error) {
	g, err := newGCM(kek)
	if err != nil {
		return nil, err
	}
	n := random(nonceSize)
	return g.Seal(n, n, key, aad), nil
}

// OpenKey opens a key sealed by SealKey; ErrAuth when kek or aad differ.
func OpenKey(kek, sealed, aad []byte) ([]byte, error) {
	g, err := newGCM(kek)
	if err != nil {
		return nil, err
	}
	if len(sealed) < nonceSize+TagSize {
		return nil, ErrAuth
	}
	k, err := g.Open(nil, sealed[:nonceSize], sealed[nonceSize:], aad)
	if err != nil {
		return nil, ErrAuth
	}
	return k, nil
}

// KeyMAC is what is stored to recognise a customer key.
func KeyMAC(salt, key []byte) []byte {
	h := hmac.New(sha256.New, salt)
	h.Write(key)
	return h.Sum(nil)
}

// SetCustomerKey records the MAC of customer key ck in m (new salt).
func (m *Meta) SetCustomerKey(ck []byte) {
	m.Salt = random(16)
	m.KeyMAC = KeyMAC(m.Salt, ck)
}

// CustomerKeyMatches reports whether ck is the key the object was
// encrypted with.
func (m *Meta) CustomerKeyMatches(ck []byte) bool {
	return len(m.KeyMAC) > 0 && hmac.Equal(m.KeyMAC, KeyMAC(m.Salt, ck))
}

// Encrypter is a reader of the ciphertext of a part whose plaintext it
// reads from r. Size reports the plaintext bytes read so far.
type Encrypter struct {
	r       io.Reader
	g       cipher.AEAD
	part    Part
	seg     int
	i       uint64
	buf     []byte // segment plaintext (+1 byte look-ahead), sealed in place; made on first use
	bufSize int
	out     []byte // ciphertext not yet read
	carry   byte
	carried bool
	done    bool
	err     error
	size    int64
	nonce   []byte
	aad     []byte
}

// NewEncrypter encrypts part p (its Number and Nonce) with dek. sizeHint
// is the plaintext's length when known (-1 otherwise); it only sizes the
// buffer, so that a small object does not cost a whole segment's.
func NewEncrypter(r io.Reader, dek []byte, p Part, seg int, sizeHint int64) (*Encrypter, error) {
	g, err := newGCM(dek)
	if err != nil {
		return nil, err
	}
	if len(p.Nonce) != nonceSize {
		return nil, errors.New("sse: part nonce must be 12 bytes")
	}
	bufSize := seg + TagSize
	if sizeHint >= 0 && sizeHint < int64(seg) {
		bufSize = int(sizeHint) + 1 + TagSize // +1: next reads one byte ahead
	}
	return &Encrypter{r: r, g: g, part: p, seg: seg, bufSize: bufSize,
		nonce: make([]byte, nonceSize), aad: make([]byte, 0, len(aadPrefix)+13)}, nil
}

// Size is the plaintext length read so far (all of it after EOF).
func (e *Encrypter) Size() int64 { return e.size }

func (e *Encrypter) Read(p []byte) (int, error) {
	for len(e.out) == 0 {
		if e.err != nil {
			return 0, e.err
		}
		if e.done {
			return 0, io.EOF
		}
		if len(p) >= e.seg+TagSize {
			// Room for a whole sealed segment: read and seal it in p, with
			// no copy (the chunker reads in large buffers).
			var ct []byte
			ct, e.err = e.next(p)
			if e.err == nil {
				return len(ct), nil
			}
			return 0, e.err
		}
		if e.buf == nil {
			e.buf = make([]byte, e.bufSize)
		}
		e.out, e.err = e.next(e.buf)
	}
	n := copy(p, e.out)
	e.out = e.out[n:]
	return n, nil
}

// next reads the next segment into buf and seals it there. It reads one
// byte beyond the segment to know whether the segment is the part's last.
// buf holds seg+TagSize bytes, or fewer when the plaintext is known to be
// shorter than a segment; a plaintext longer than the hint then grows it.
func (e *Encrypter) next(buf []byte) ([]byte, error) {
	if len(buf) < e.seg+TagSize && e.size == 0 && !e.carried {
		n, err := io.ReadFull(e.r, buf[:len(buf)-TagSize])
		if err == nil { // longer than the hint: continue with a whole segment
			e.buf = append(make([]byte, 0, e.seg+TagSize), buf[:n]...)[:e.seg+TagSize]
			return e.nextAfter(e.buf, n)
		}
		if err != io.EOF && err != io.ErrUnexpectedEOF {
			return nil, err
		}
		return e.seal(buf[:n], true), nil
	}
	return e.nextAfter(buf, 0)
}

// nextAfter is next with the first have bytes of the segment already in buf.
func (e *Encrypter) nextAfter(buf []byte, have int) ([]byte, error) {
	pt := buf[:e.seg+1]
	start := have
	if e.carried {
		pt[0] = e.carry
		start = 1
	}
	m, err := io.ReadFull(e.r, pt[start:])
	n := start + m
	final := false
	switch {
	case err == nil:
		e.carry, e.carried = pt[e.seg], true
		n = e.seg
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		final, e.carried = true, false
	default:
		return nil, err
	}
	return e.seal(pt[:n], final), nil
}

// seal seals the segment pt in place (its buffer has TagSize bytes more).
func (e *Encrypter) seal(pt []byte, final bool) []byte {
	e.size += int64(len(pt))
	e.nonce = segNonce(e.nonce, e.part.Nonce, e.i)
	e.aad = segAAD(e.aad, e.part.Number, e.i, final)
	ct := e.g.Seal(pt[:0], e.nonce, pt, e.aad)
	e.i++
	e.done = final
	return ct
}

// Opener opens stored bytes [off, off+n) of the object.
type Opener func(off, n int64) (io.ReadCloser, error)

// NewDecrypter returns a reader of plaintext bytes [off, off+n) of the
// object described by m, reading only the segments that hold them. The
// caller has checked the range against PlainSize. It reads and decrypts
// in the caller's goroutine, in place in the caller's buffer when that
// holds whole segments (see PieceSize); ReadAhead moves the work to a
// goroutine of its own for a caller that does not read ahead itself.
func NewDecrypter(m *Meta, dek []byte, off, n int64, open Opener) (io.ReadCloser, error) {
	g, err := newGCM(dek)
	if err != nil {
		return nil, err
	}
	if off < 0 || n < 0 || off+n > m.PlainSize() {
		return nil, fmt.Errorf("sse: range %d+%d outside %d bytes", off, n, m.PlainSize())
	}
	d := &decrypter{m: m, g: g, skip: off, left: n}
	if n == 0 {
		return d, nil
	}
	// Find the first segment: part index, segment index, and where it is stored.
	var plainBase, cipherBase int64
	for d.pi = 0; d.pi < len(m.Parts); d.pi++ {
		ps := m.Parts[d.pi].Size
		if off < plainBase+ps {
			break
		}
		plainBase += ps
		cipherBase += CipherSize(ps, m.Segment)
	}
	seg := int64(m.Segment)
	d.si = uint64((off - plainBase) / seg)
	d.skip = off - plainBase - int64(d.si)*seg
	start := cipherBase + int64(d.si)*(seg+TagSize)
	end := cipherEnd(m, off+n)
	d.body, err = open(start, end-start)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// PieceSize is the size of a buffer that a decrypter fills with whole
// segments opened in place, with no copy: four segments with their tags.
// A caller that reads in buffers of this size, and is content with a
// Read that returns less than a full buffer (io.ReadAtLeast with
// PieceSize-SegmentSize-TagSize or less), gets every whole segment of a
// read without an intermediate buffer.
const PieceSize = 4 * (SegmentSize + TagSize)

// cipherEnd is the stored offset where the segment holding plaintext byte
// at-1 ends.
func cipherEnd(m *Meta, at int64) int64 {
	var plainBase, cipherBase int64
	seg := int64(m.Segment)
	for _, p := range m.Parts {
		if at <= plainBase+p.Size {
			i := (at - plainBase - 1) / seg // segment of the last byte
			if at == plainBase {
				i = 0
			}
			return cipherBase + min(CipherSize(p.Size, m.Segment), (i+1)*(seg+TagSize))
		}
		plainBase += p.Size
		cipherBase += CipherSize(p.Size, m.Segment)
	}
	return cipherBase
}

type decrypter struct {
	m     *Meta
	g     cipher.AEAD
	body  io.ReadCloser
	pi    int    // current part index
	si    uint64 // current segment index in the part
	skip  int64  // plaintext bytes to drop from the next segment
	left  int64  // plaintext bytes still to deliver
	buf   []byte
	out   []byte
	nonce []byte
	aad   []byte
	err   error
}

func (d *decrypter) Read(p []byte) (int, error) {
	// While whole segments are wanted and p has room for them, read as
	// many as fit and open them in p, with no intermediate buffer: the
	// gateway reads in large buffers and writes each to the client, and
	// fewer, larger writes cost less.
	n := 0
	stride := d.m.Segment + TagSize
	for len(d.out) == 0 && d.err == nil && d.skip == 0 && d.left >= int64(d.m.Segment) && len(p)-n >= stride {
		var m int
		m, d.err = d.openRun(p[n:], (len(p)-n)/stride)
		n += m
	}
	if n > 0 {
		return n, nil
	}
	for len(d.out) == 0 {
		if d.err != nil {
			return 0, d.err
		}
		if d.left == 0 {
			return 0, io.EOF
		}
		if d.buf == nil {
			d.buf = make([]byte, min(int64(d.m.Segment), d.m.maxPart())+TagSize)
		}
		var m int
		m, d.err = d.openRun(d.buf, 1)
		d.out = d.buf[:m]
	}
	n = copy(p, d.out)
	d.out = d.out[n:]
	return n, nil
}

// openRun reads up to max consecutive segments of the current part into
// buf (room for max whole segments with their tags), opens them there and
// returns the length of the plaintext wanted from them, which starts at
// buf's start. Each segment is read to where its plaintext belongs, just
// after the previous one's: its tag lands where the next segment goes and
// is overwritten by it once opened, so the plaintext is never moved.
// Segments after the first are taken only when the range wants them
// whole, so that a run never reads past it.
func (d *decrypter) openRun(buf []byte, max int) (int, error) {
	for d.pi < len(d.m.Parts) && int64(d.si) >= segments(d.m.Parts[d.pi].Size, d.m.Segment) {
		d.pi, d.si = d.pi+1, 0
	}
	if d.pi >= len(d.m.Parts) {
		return 0, io.ErrUnexpectedEOF
	}
	part := d.m.Parts[d.pi]
	if len(part.Nonce) != nonceSize {
		return 0, ErrAuth
	}
	seg := int64(d.m.Segment)
	nseg := segments(part.Size, d.m.Segment)
	k := min(int64(max), nseg-int64(d.si), max1(d.left/seg))
	out := 0
	for range k {
		final := int64(d.si) == nseg-1
		ctLen := seg + TagSize
		if final {
			ctLen -= nseg*seg - part.Size
		}
		ct := buf[out : int64(out)+ctLen]
		if _, err := io.ReadFull(d.body, ct); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return out, err
		}
		d.nonce = segNonce(d.nonce, part.Nonce, d.si)
		d.aad = segAAD(d.aad, part.Number, d.si, final)
		pt, err := d.g.Open(ct[:0], d.nonce, ct, d.aad)
		if err != nil {
			return out, fmt.Errorf("sse: part %d segment %d: %w", part.Number, d.si, ErrAuth)
		}
		d.si++
		pt = pt[d.skip:]
		d.skip = 0
		if int64(len(pt)) > d.left {
			pt = pt[:d.left]
		}
		d.left -= int64(len(pt))
		out += copy(buf[out:], pt) // moves only what a skip cut off
	}
	return out, nil
}

// max1 is n, or 1 when n is smaller: a run always opens one segment.
func max1(n int64) int64 { return max(n, 1) }

func (d *decrypter) Close() error {
	if d.body == nil {
		return nil
	}
	return d.body.Close()
}
