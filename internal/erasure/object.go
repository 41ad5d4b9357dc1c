package erasure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/volume"
)

// streamAbove: Open reads a needle whose record is at most this long
// whole (one range read, checked by its CRC); a longer one is streamed.
const streamAbove = 1 << 20

// streamChunk bounds one range read of a streamed needle; the first read
// fetches streamFirst bytes (or what the caller asked for), each next one
// twice as many, so a small range of a large needle costs a small read.
const (
	streamChunk = 1 << 20
	streamFirst = 64 << 10
)

// Object is a needle of an EC volume being read, as returned by Open. A
// small needle is read and verified whole; a large one's data is read on
// demand, at most streamChunk bytes at a time, every block checked against
// its shard's block checksums (reconstructed from other shards when a
// shard fails), and reading it sequentially to the end checks the needle's
// own checksums too. Not safe for concurrent use.
type Object struct {
	Meta    needle.Meta
	Size    int64
	DataCRC uint32   // the needle's data CRC (its ETag)
	Bad     ShardSet // shards that failed a read so far

	data []byte // a small needle's data

	ctx     context.Context
	layout  Layout
	fetch   Fetcher
	prefer  []int
	dataOff int64 // .dat offset of the data
	pos     int64
	buf     []byte
	bufOff  int64 // data offset of buf[0]
	next    int64
	seqOK   bool
	check   needle.DataCheck // of the data read so far while seqOK
}

// Bytes is a small needle's data, or nil for a streamed one.
func (o *Object) Bytes() []byte { return o.data }

// Open returns needle key for reading (see Object); reads go through
// fetch, which must stay usable until the Object is no longer read, and
// ctx bounds them. Errors as Read.
func (v *Volume) Open(ctx context.Context, key uint64, cookie uint32, fetch Fetcher, prefer []int, now time.Time) (*Object, error) {
	e, err := v.Locate(key)
	if err != nil {
		return nil, err
	}
	if needle.RecordSize(e.Size) <= streamAbove {
		rec, bad, err := v.Read(ctx, key, cookie, fetch, prefer, now)
		if err != nil {
			return &Object{Bad: bad}, err
		}
		data := rec.Data
		if data == nil {
			data = []byte{}
		}
		return &Object{Meta: rec.Meta, Size: int64(len(data)), DataCRC: rec.DataCRC, Bad: bad, data: data}, nil
	}
	o := &Object{ctx: ctx, layout: v.Index.Layout, fetch: verifiedFetch(fetch), prefer: prefer, next: streamFirst, seqOK: true}
	head, err := o.read(e.Offset, 4096)
	if err != nil {
		return o, fmt.Errorf("ec volume %d: needle %x: %w", v.ID, key, err)
	}
	m, h, dataOff, dataSize, need, err := needle.ParseMeta(head)
	if err == nil && need > len(head) {
		if head, err = o.read(e.Offset, int64(need)); err != nil {
			return o, fmt.Errorf("ec volume %d: needle %x: %w", v.ID, key, err)
		}
		m, h, dataOff, dataSize, _, err = needle.ParseMeta(head)
	}
	if err != nil || h.Key != key || h.BodySize != e.Size {
		return o, fmt.Errorf("ec volume %d: needle %x: %w", v.ID, key, needle.ErrCorrupt)
	}
	if h.Cookie != cookie {
		return o, fmt.Errorf("ec volume %d: read %x: %w", v.ID, key, volume.ErrCookieMismatch)
	}
	if expired(&m, v.sb.TTL, now) {
		return o, fmt.Errorf("ec volume %d: needle %x expired: %w", v.ID, key, volume.ErrNotFound)
	}
	tr, err := o.read(e.Offset+needle.HeaderSize+int64(h.BodySize), needle.TrailerSize)
	if err != nil {
		return o, fmt.Errorf("ec volume %d: needle %x: %w", v.ID, key, err)
	}
	var wantRec uint32
	o.DataCRC, wantRec = needle.ParseTrailer(tr)
	o.Meta, o.Size = m, int64(dataSize)
	o.dataOff = e.Offset + int64(dataOff)
	o.check = needle.NewDataCheck(head[:dataOff], o.DataCRC, wantRec)
	return o, nil
}

// read returns .dat bytes [off, off+n) (n cut at the volume's end),
// verified block by block.
func (o *Object) read(off, n int64) ([]byte, error) {
	n = min(n, o.layout.DatSize-off)
	b, bad, err := ReadRange(o.ctx, o.layout, o.fetch, off, n, 0, o.prefer)
	o.Bad |= bad
	return b, err
}

// Read reads the data sequentially.
func (o *Object) Read(p []byte) (int, error) {
	if o.pos >= o.Size {
		return 0, io.EOF
	}
	if o.data != nil {
		n := copy(p, o.data[o.pos:])
		o.pos += int64(n)
		return n, nil
	}
	if o.pos < o.bufOff || o.pos >= o.bufOff+int64(len(o.buf)) {
		n := min(max(int64(len(p)), o.next), streamChunk, o.Size-o.pos)
		o.next = min(2*o.next, streamChunk)
		b, err := o.read(o.dataOff+o.pos, n)
		if err != nil {
			return 0, err
		}
		o.buf, o.bufOff = b, o.pos
	}
	n := copy(p, o.buf[o.pos-o.bufOff:])
	if o.seqOK {
		o.check.Add(p[:n])
	}
	o.pos += int64(n)
	if o.seqOK && o.pos == o.Size {
		if !o.check.Verify() {
			return n, fmt.Errorf("%w: checksum mismatch in needle %x", needle.ErrCorrupt, o.Meta.Key)
		}
	}
	return n, nil
}

// Seek implements io.Seeker. Moving away from the current position stops
// the check of the needle's own checksums (the blocks are still checked).
func (o *Object) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += o.pos
	case io.SeekEnd:
		offset += o.Size
	}
	if offset < 0 {
		return 0, errors.New("erasure: seek before start")
	}
	if offset != o.pos {
		o.seqOK = false
	}
	o.pos = offset
	return offset, nil
}
