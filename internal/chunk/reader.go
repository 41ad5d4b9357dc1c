package chunk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
)

// Reader reads a file given its resolved chunks (see Resolve). Read
// streams: it keeps one blob stream open and reads it sequentially until
// the interval ends, so a large file is read with one request per chunk
// and no buffering beyond the caller's. Seek and ReadAt make http.ServeContent
// and ranged reads work. A Reader is not safe for concurrent use, except
// ReadAt, which keeps no state.
type Reader struct {
	ctx  context.Context
	o    Opener
	vis  []Interval
	size int64
	pos  int64

	cur    io.ReadCloser // open blob stream ending at curEnd, positioned at pos
	curEnd int64
}

// NewReader returns a reader of a file of the given size made of chunks,
// which must have been resolved (manifests expanded). Its blob reads use ctx.
func NewReader(ctx context.Context, o Opener, chunks []Chunk, size int64) *Reader {
	return &Reader{ctx: ctx, o: o, vis: Visible(chunks), size: size}
}

// Size is the file size the reader was made with.
func (r *Reader) Size() int64 { return r.size }

// Read implements io.Reader.
func (r *Reader) Read(p []byte) (int, error) {
	if r.pos >= r.size {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	if r.cur == nil {
		i := sort.Search(len(r.vis), func(k int) bool { return r.vis[k].Stop > r.pos })
		if i == len(r.vis) || r.vis[i].Start > r.pos {
			holeEnd := r.size
			if i < len(r.vis) {
				holeEnd = min(holeEnd, r.vis[i].Start)
			}
			n := int(min(int64(len(p)), holeEnd-r.pos))
			clear(p[:n])
			r.pos += int64(n)
			return n, nil
		}
		iv := r.vis[i]
		end := min(iv.Stop, r.size)
		rc, err := OpenChunk(r.ctx, r.o, iv.FID, iv.CipherKey, iv.ChunkSize, iv.ChunkOffset+r.pos-iv.Start, end-r.pos)
		if err != nil {
			return 0, fmt.Errorf("chunk: read %s at %d: %w", iv.FID, r.pos, err)
		}
		r.cur, r.curEnd = rc, end
	}
	want := min(int64(len(p)), r.curEnd-r.pos)
	n, err := r.cur.Read(p[:want])
	r.pos += int64(n)
	if r.pos >= r.curEnd {
		r.closeCur()
		return n, nil
	}
	if err == io.EOF {
		r.closeCur()
		return n, fmt.Errorf("chunk: blob ended %d bytes early: %w", r.curEnd-r.pos, io.ErrUnexpectedEOF)
	}
	if err != nil {
		r.closeCur()
	}
	return n, err
}

func (r *Reader) closeCur() {
	if r.cur != nil {
		r.cur.Close()
		r.cur = nil
	}
}

// Seek implements io.Seeker. Seeking elsewhere drops the open blob stream.
func (r *Reader) Seek(offset int64, whence int) (int64, error) {
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = r.pos + offset
	case io.SeekEnd:
		abs = r.size + offset
	default:
		return 0, errors.New("chunk: seek: bad whence")
	}
	if abs < 0 {
		return 0, errors.New("chunk: seek: negative position")
	}
	if abs != r.pos {
		r.closeCur()
		r.pos = abs
	}
	return abs, nil
}

// ReadAt implements io.ReaderAt.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.size {
		return 0, io.EOF
	}
	got := 0
	for _, v := range Views(r.vis, r.size, off, int64(len(p))) {
		dst := p[v.FileOffset-off : v.FileOffset-off+v.Size]
		if v.FID == "" {
			clear(dst)
			got += len(dst)
			continue
		}
		rc, err := OpenChunk(r.ctx, r.o, v.FID, v.CipherKey, v.ChunkSize, v.ChunkOffset, v.Size)
		if err != nil {
			return got, fmt.Errorf("chunk: read %s at %d: %w", v.FID, v.FileOffset, err)
		}
		n, err := io.ReadFull(rc, dst)
		rc.Close()
		got += n
		if err != nil {
			return got, fmt.Errorf("chunk: read %s at %d: %w", v.FID, v.FileOffset, err)
		}
	}
	if got < len(p) {
		return got, io.EOF
	}
	return got, nil
}

// Close releases the open blob stream, if any.
func (r *Reader) Close() error {
	r.closeCur()
	return nil
}
