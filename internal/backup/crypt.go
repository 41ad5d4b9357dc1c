package backup

import (
	"bufio"
	"context"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/kelpfs/kelp/internal/aesgcm"
)

// An encrypted backup (Config.Key) stores every file's content sealed, so
// the destination (a directory, a bucket) holds no plaintext of the data:
//
//	magic "KELPBK1\x00" | nonce (12) | file key sealed under the backup key (32+16)
//	| segments: up to 64 KiB of content each, AES-256-GCM under the file key,
//	  nonce = segment index, additional data = 1 for the last segment else 0
//
// Each file gets a fresh random file key, so the same content never gives
// the same bytes, and a renamed file stays readable (nothing is bound to
// its path). The last-segment mark makes a file cut short at a segment
// boundary fail to open, as does any changed byte. The backup key is the
// SHA-256 of a secret the operator keeps (DeriveKey); state.json records
// that the backup is encrypted and a check value of the key, so a run with
// the wrong key or none stops before touching anything.

const (
	encMagic   = "KELPBK1\x00"
	encHeader  = len(encMagic) + 12 + 32 + 16
	encSegment = 64 << 10
	encTag     = 16
)

// ErrBadKey is a backup key that is not the one the backup was made with,
// or an encrypted file that does not open (changed or cut short).
var ErrBadKey = errors.New("backup: encrypted content does not open with this key")

// DeriveKey turns the operator's secret (at least 16 characters) into the
// 32-byte backup key.
func DeriveKey(secret string) ([]byte, error) {
	if len(secret) < 16 {
		return nil, errors.New("backup: the encryption key must be at least 16 characters")
	}
	h := sha256.Sum256([]byte("kelp backup key v1\x00" + secret))
	return h[:], nil
}

// keyCheck is what state.json keeps to recognise the key: not the key.
func keyCheck(key []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("kelp backup key check"))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// plainSize is the content size of an encrypted file of n bytes, or -1 when
// no encrypted file has that size.
func plainSize(n int64) int64 {
	x := n - int64(encHeader)
	if x < encTag {
		return -1
	}
	segs := (x + encSegment + encTag - 1) / (encSegment + encTag)
	return x - segs*encTag
}

func gcm(key []byte) (cipher.AEAD, error) {
	return aesgcm.New(key) // crypto/cipher's GCM, byte for byte; faster where the CPU has VAES
}

func segAD(last bool) []byte {
	if last {
		return []byte{1}
	}
	return []byte{0}
}

func segNonce(n *[12]byte, seg uint64) []byte {
	binary.BigEndian.PutUint64(n[4:], seg)
	return n[:]
}

// sealReader reads plaintext from src and yields the encrypted file.
type sealReader struct {
	src  *bufio.Reader
	aead cipher.AEAD
	seg  uint64
	out  []byte // pending output
	buf  []byte
	done bool
	err  error
}

func newSealReader(backupKey []byte, src io.Reader) (*sealReader, error) {
	fileKey := make([]byte, 32)
	var nonce [12]byte
	if _, err := rand.Read(fileKey); err != nil {
		return nil, err
	}
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, err
	}
	wrap, err := gcm(backupKey)
	if err != nil {
		return nil, err
	}
	aead, err := gcm(fileKey)
	if err != nil {
		return nil, err
	}
	hdr := append([]byte(encMagic), nonce[:]...)
	hdr = wrap.Seal(hdr, nonce[:], fileKey, []byte(encMagic))
	return &sealReader{src: bufio.NewReaderSize(src, encSegment+1), aead: aead, out: hdr,
		buf: make([]byte, encSegment, encSegment+encTag)}, nil
}

func (r *sealReader) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.done {
			return 0, io.EOF
		}
		n, err := io.ReadFull(r.src, r.buf[:encSegment])
		if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
			r.err = err
			return 0, err
		}
		last := err != nil
		if !last { // a full segment: the last one when nothing follows
			if _, perr := r.src.Peek(1); perr == io.EOF {
				last = true
			} else if perr != nil {
				r.err = perr
				return 0, perr
			}
		}
		var nonce [12]byte
		r.out = r.aead.Seal(r.buf[:0], segNonce(&nonce, r.seg), r.buf[:n], segAD(last))
		r.seg++
		r.done = last
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

// openReader decrypts an encrypted file read from src.
type openReader struct {
	src  io.ReadCloser
	aead cipher.AEAD
	seg  uint64
	in   []byte
	out  []byte
	done bool
	err  error
}

func newOpenReader(backupKey []byte, src io.ReadCloser) (*openReader, error) {
	hdr := make([]byte, encHeader)
	if _, err := io.ReadFull(src, hdr); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrBadKey, err)
	}
	if string(hdr[:len(encMagic)]) != encMagic {
		return nil, fmt.Errorf("%w: not an encrypted backup file", ErrBadKey)
	}
	wrap, err := gcm(backupKey)
	if err != nil {
		return nil, err
	}
	nonce := hdr[len(encMagic) : len(encMagic)+12]
	fileKey, err := wrap.Open(nil, nonce, hdr[len(encMagic)+12:], []byte(encMagic))
	if err != nil {
		return nil, ErrBadKey
	}
	aead, err := gcm(fileKey)
	if err != nil {
		return nil, err
	}
	// One byte more than a segment tells whether another follows.
	return &openReader{src: src, aead: aead, in: make([]byte, 0, encSegment+encTag+1)}, nil
}

func (r *openReader) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.done {
			return 0, io.EOF
		}
		have := len(r.in)
		n, err := io.ReadFull(r.src, r.in[have:cap(r.in)])
		r.in = r.in[:have+n]
		if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
			r.err = err
			return 0, err
		}
		last := err != nil
		seg := r.in
		if !last {
			seg = r.in[:encSegment+encTag]
		}
		var nonce [12]byte
		plain, oerr := r.aead.Open(nil, segNonce(&nonce, r.seg), seg, segAD(last))
		if oerr != nil {
			r.err = fmt.Errorf("%w: segment %d", ErrBadKey, r.seg)
			return 0, r.err
		}
		r.seg++
		r.out = plain
		r.in = append(r.in[:0], r.in[len(seg):]...)
		r.done = last
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

func (r *openReader) Close() error { return r.src.Close() }

// cryptDest seals what is put and opens what is read; sizes are the
// content's, so an unchanged file is recognised (same size and mtime).
type cryptDest struct {
	Dest
	key []byte
}

func fileMeta(m Meta) Meta {
	if m.Mode.IsRegular() {
		m.Size = plainSize(m.Size)
	}
	return m
}

func (d cryptDest) LoadState(ctx context.Context) (State, bool, error) { return d.Dest.LoadState(ctx) }

func (d cryptDest) SaveState(ctx context.Context, st State) error {
	st.Encrypted, st.KeyCheck = true, keyCheck(d.key)
	return d.Dest.SaveState(ctx, st)
}

func (d cryptDest) Stat(ctx context.Context, rel string) (Meta, bool, error) {
	m, ok, err := d.Dest.Stat(ctx, rel)
	return fileMeta(m), ok, err
}

func (d cryptDest) Walk(ctx context.Context, fn func(rel string, m Meta) error) error {
	return d.Dest.Walk(ctx, func(rel string, m Meta) error { return fn(rel, fileMeta(m)) })
}

func (d cryptDest) Put(ctx context.Context, rel string, m Meta, r io.Reader) error {
	if !m.Mode.IsRegular() {
		return d.Dest.Put(ctx, rel, m, r)
	}
	sr, err := newSealReader(d.key, r)
	if err != nil {
		return err
	}
	if m.Size >= 0 {
		m.Size = int64(encHeader) + m.Size + max(1, (m.Size+encSegment-1)/encSegment)*encTag
	}
	return d.Dest.Put(ctx, rel, m, sr)
}

func (d cryptDest) Open(ctx context.Context, rel string) (io.ReadCloser, error) {
	rc, err := d.Dest.Open(ctx, rel)
	if err != nil {
		return nil, err
	}
	or, err := newOpenReader(d.key, rc)
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	return or, nil
}

// checkState refuses a destination that does not match the run's key: an
// encrypted backup without the key or with another one, a plaintext backup
// to be continued encrypted.
func checkState(st State, ok bool, key []byte) error {
	switch {
	case !ok:
		return nil
	case st.Encrypted && key == nil:
		return errors.New("backup: the destination holds an encrypted backup: give its key (--encrypt.key)")
	case st.Encrypted && !hmac.Equal([]byte(st.KeyCheck), []byte(keyCheck(key))):
		return fmt.Errorf("%w (the destination was made with another key)", ErrBadKey)
	case !st.Encrypted && key != nil:
		return errors.New("backup: the destination holds an unencrypted backup: encrypt into a new destination")
	}
	return nil
}
