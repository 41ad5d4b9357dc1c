package volume

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/vfs"
)

// largeHeadRead is the first read of a large needle: header, fixed metadata
// and, almost always, the name, mime and pairs.
const largeHeadRead = 4096

// Object is a needle being read. Its data is read with Read/Seek (io.ReadSeeker)
// or ReadAt. A small needle was read and verified in one positioned read;
// a large one is read from the file on demand, and reading it sequentially to
// the end verifies its checksums (needle.ErrCorrupt on mismatch). Close
// releases the file; an Object stays readable even if a vacuum replaces the
// volume's files meanwhile. Not safe for concurrent use.
type Object struct {
	Meta    needle.Meta
	Size    int64
	ETag    string
	ModTime time.Time

	data []byte // small needles: the whole data
	crc  uint32 // the data's CRC-32C as stored

	d       *datFile // large needles
	dataOff int64    // file offset of the data
	pos     int64
	seqOK   bool  // reads so far were sequential from 0
	hashed  int64 // bytes from 0 taken into check while seqOK
	check   needle.DataCheck
	closed  bool
}

// Bytes returns the data of a small needle without copying, or nil for a
// large one (read those with Read).
func (o *Object) Bytes() []byte { return o.data }

// DataCRC is the CRC-32C of the whole data, as stored with it.
func (o *Object) DataCRC() uint32 { return o.crc }

// File returns the volume file a large needle's data is read from and the
// data's offset in it (ok false for a small needle: Bytes has its data). The
// file stays open at least until Close; its checksums are the caller's to
// check.
func (o *Object) File() (f vfs.File, dataOff int64, ok bool) {
	if o.d == nil {
		return nil, 0, false
	}
	return o.d.f, o.dataOff, true
}

// Read reads data sequentially.
func (o *Object) Read(p []byte) (int, error) {
	if o.closed {
		return 0, ErrClosed
	}
	if o.pos >= o.Size {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), o.Size-o.pos)]
	var n int
	var err error
	if o.data != nil || o.d == nil {
		n = copy(p, o.data[o.pos:])
	} else {
		n, err = o.d.f.ReadAt(p, o.dataOff+o.pos)
		if err == io.EOF && n == len(p) {
			err = nil
		} else if err == io.EOF {
			err = fmt.Errorf("%w: data ends early", needle.ErrCorrupt)
		}
		// The checksums cover reads that follow each other from 0: a seek
		// (http.ServeContent seeks to the end and back to learn the size)
		// keeps them as long as the next read starts where they stopped.
		if o.seqOK = o.seqOK && o.pos == o.hashed; o.seqOK {
			o.check.Add(p[:n])
			o.hashed += int64(n)
		}
	}
	o.pos += int64(n)
	if err == nil && o.d != nil && o.seqOK && o.pos == o.Size {
		if !o.check.Verify() {
			err = fmt.Errorf("%w: checksum mismatch in needle %x", needle.ErrCorrupt, o.Meta.Key)
			// The last piece is withheld: a reader (an HTTP answer with
			// its Content-Length) must end short, not look complete.
			o.pos -= int64(n)
			return 0, err
		}
	}
	return n, err
}

// SkipChecksum turns the checksum pass off for this Object: its reader
// checks every byte itself (an AES-GCM-sealed blob, see
// client.HeaderReaderAuthenticates), so the pass would only cost CPU.
func (o *Object) SkipChecksum() { o.seqOK = false }

// ReadAt reads data at off; it does not verify checksums of large needles.
func (o *Object) ReadAt(p []byte, off int64) (int, error) {
	if o.closed {
		return 0, ErrClosed
	}
	if off < 0 {
		return 0, errors.New("volume: negative offset")
	}
	if off >= o.Size {
		return 0, io.EOF
	}
	want := min(int64(len(p)), o.Size-off)
	var n int
	var err error
	if o.d == nil {
		n = copy(p, o.data[off:])
	} else {
		n, err = o.d.f.ReadAt(p[:want], o.dataOff+off)
		if err == io.EOF && int64(n) == want {
			err = nil
		}
	}
	if err == nil && int64(n) < int64(len(p)) {
		err = io.EOF
	}
	return n, err
}

// Seek implements io.Seeker. Seeking anywhere but the current position stops
// checksum verification for this Object.
func (o *Object) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += o.pos
	case io.SeekEnd:
		offset += o.Size
	}
	if offset < 0 {
		return 0, errors.New("volume: seek before start")
	}
	o.pos = offset
	return offset, nil
}

// Close releases the Object's hold on the volume file.
func (o *Object) Close() error {
	if o.closed {
		return nil
	}
	o.closed = true
	if o.d != nil {
		o.d.release()
	}
	return nil
}

// Read looks up key and returns its needle. A needle whose record is at most
// 1 MiB is read with exactly one positioned read and its CRC verified before
// Read returns. Errors: ErrNotFound (unknown or expired), ErrDeleted,
// ErrCookieMismatch, needle.ErrCorrupt.
func (v *Volume) Read(key uint64, cookie uint32) (*Object, error) {
	v.mu.RLock()
	if v.closed {
		v.mu.RUnlock()
		return nil, fmt.Errorf("volume %d: %w", v.cfg.ID, ErrClosed)
	}
	e, ok := v.idx.get(key)
	d := v.dat.acquire()
	volTTL := v.sb.TTL
	v.mu.RUnlock()
	o, err := v.readEntry(d, key, cookie, e, ok)
	if err != nil || o.d == nil {
		d.release()
	}
	if err != nil {
		return nil, err
	}
	if v.expired(&o.Meta, volTTL) {
		o.Close()
		return nil, fmt.Errorf("volume %d: needle %x expired: %w", v.cfg.ID, key, ErrNotFound)
	}
	return o, nil
}

func (v *Volume) readEntry(d *datFile, key uint64, cookie uint32, e indexEntry, ok bool) (*Object, error) {
	return v.readEntryCookie(d, key, cookie, true, e, ok)
}

// readEntryCookie is readEntry; with checkCookie false any cookie is taken.
func (v *Volume) readEntryCookie(d *datFile, key uint64, cookie uint32, checkCookie bool, e indexEntry, ok bool) (*Object, error) {
	switch {
	case !ok:
		return nil, fmt.Errorf("volume %d: needle %x: %w", v.cfg.ID, key, ErrNotFound)
	case e.size == needle.TombstoneSize:
		return nil, fmt.Errorf("volume %d: needle %x: %w", v.cfg.ID, key, ErrDeleted)
	}
	off := int64(e.off) * needle.Align
	recLen := needle.RecordSize(e.size)
	if recLen <= smallRecord {
		buf := make([]byte, recLen)
		if err := readFull(d.f, buf, off); err != nil {
			return nil, fmt.Errorf("volume %d: read %x: %w", v.cfg.ID, key, err)
		}
		rec, err := needle.ParseRecord(buf)
		if err != nil || rec.Header.Key != key || rec.Header.BodySize != e.size {
			return nil, fmt.Errorf("volume %d: needle %x at %d: %w", v.cfg.ID, key, off, needle.ErrCorrupt)
		}
		if checkCookie && rec.Meta.Cookie != cookie {
			return nil, fmt.Errorf("volume %d: read %x: %w", v.cfg.ID, key, ErrCookieMismatch)
		}
		data := rec.Data
		if data == nil {
			data = []byte{}
		}
		return &Object{Meta: rec.Meta, Size: int64(len(data)), ETag: etag(rec.DataCRC), ModTime: modTime(&rec.Meta), data: data, crc: rec.DataCRC}, nil
	}
	return v.openLarge(d, key, cookie, checkCookie, e, off)
}

// openLarge reads a large needle's head and trailer; the data is read later.
func (v *Volume) openLarge(d *datFile, key uint64, cookie uint32, checkCookie bool, e indexEntry, off int64) (*Object, error) {
	// The head, the trailer and then the body are read: one disk read of
	// the whole needle ahead of them, not one per jump.
	vfs.WillNeed(d.f, off, needle.RecordSize(e.size))
	head := make([]byte, largeHeadRead)
	if err := readFull(d.f, head, off); err != nil {
		return nil, fmt.Errorf("volume %d: read %x: %w", v.cfg.ID, key, err)
	}
	m, h, dataOff, dataSize, need, err := needle.ParseMeta(head)
	if err == nil && need > len(head) {
		head = make([]byte, need)
		if err := readFull(d.f, head, off); err != nil {
			return nil, fmt.Errorf("volume %d: read %x: %w", v.cfg.ID, key, err)
		}
		m, h, dataOff, dataSize, _, err = needle.ParseMeta(head)
	}
	if err != nil || h.Key != key || h.BodySize != e.size {
		return nil, fmt.Errorf("volume %d: needle %x at %d: %w", v.cfg.ID, key, off, needle.ErrCorrupt)
	}
	if checkCookie && h.Cookie != cookie {
		return nil, fmt.Errorf("volume %d: read %x: %w", v.cfg.ID, key, ErrCookieMismatch)
	}
	var tr [needle.TrailerSize]byte
	if err := readFull(d.f, tr[:], off+needle.HeaderSize+int64(h.BodySize)); err != nil {
		return nil, fmt.Errorf("volume %d: read %x: %w", v.cfg.ID, key, err)
	}
	wantData, wantRec := needle.ParseTrailer(tr[:])
	return &Object{
		Meta: m, Size: int64(dataSize), ETag: etag(wantData), ModTime: modTime(&m), crc: wantData,
		d: d, dataOff: off + int64(dataOff), seqOK: true,
		check: needle.NewDataCheck(head[:dataOff], wantData, wantRec),
	}, nil
}

func modTime(m *needle.Meta) time.Time {
	if m.LastModified != 0 {
		return time.Unix(m.LastModified, 0)
	}
	return time.Unix(0, m.AppendedAtNs)
}
