package sse

import (
	"io"
	"sync"
)

// aheadPiece is plaintext decrypted ahead of the reader.
type aheadPiece struct {
	buf []byte
	n   int
	err error // what the source returned with these bytes
}

// aheadSize holds four whole segments with their tags, so that each
// decrypter Read opens them in place.
const aheadSize = PieceSize

var aheadBufs = sync.Pool{New: func() any { b := make([]byte, aheadSize); return &b }}

// aheadReader reads and decrypts the next piece of an object in its own
// goroutine while the caller writes the previous one to its client: the
// fetch, the AES-GCM opening and the socket write overlap instead of
// taking turns. Two pieces are in flight at most.
type aheadReader struct {
	src  io.ReadCloser
	full chan *aheadPiece
	free chan *aheadPiece
	stop chan struct{}
	done chan struct{}

	cur  *aheadPiece
	off  int
	err  error
	once sync.Once
}

// ReadAhead returns a reader of src that reads the next piece of at most
// PieceSize bytes in a goroutine of its own while the caller consumes the
// previous one. For a reader from NewDecrypter that is larger than a piece
// and a caller that does not read ahead itself (S3's GET does: it reads
// straight from the decrypter); it costs a copy of every byte, so a small
// src is returned as it is.
func ReadAhead(src io.ReadCloser, size int64) io.ReadCloser {
	if size <= aheadSize {
		return src
	}
	return newAheadReader(src)
}

func newAheadReader(src io.ReadCloser) *aheadReader {
	r := &aheadReader{
		src:  src,
		full: make(chan *aheadPiece, 2),
		free: make(chan *aheadPiece, 2),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	for range 2 {
		r.free <- &aheadPiece{buf: *aheadBufs.Get().(*[]byte)}
	}
	go r.fill()
	return r
}

// fill decrypts pieces until the source ends or fails, or Close.
func (r *aheadReader) fill() {
	defer close(r.done)
	for {
		var p *aheadPiece
		select {
		case p = <-r.free:
		case <-r.stop:
			return
		}
		p.n, p.err = r.src.Read(p.buf)
		r.full <- p // room for it: there are two pieces and two slots
		if p.err != nil {
			return
		}
	}
}

func (r *aheadReader) Read(b []byte) (int, error) {
	for r.cur == nil || r.off == r.cur.n {
		if r.cur != nil {
			if r.cur.err != nil {
				r.err = r.cur.err
			}
			r.free <- r.cur
			r.cur = nil
		}
		if r.err != nil {
			return 0, r.err
		}
		r.cur, r.off = <-r.full, 0
	}
	n := copy(b, r.cur.buf[r.off:r.cur.n])
	r.off += n
	return n, nil
}

// Close stops the goroutine (after the read it is in, if any) and closes
// the source.
func (r *aheadReader) Close() error {
	var err error
	r.once.Do(func() {
		close(r.stop)
		<-r.done
		err = r.src.Close()
		r.recycle()
		r.err = io.ErrClosedPipe
	})
	return err
}

// recycle returns the buffers, all of them idle now, to the pool.
func (r *aheadReader) recycle() {
	if r.cur != nil {
		aheadBufs.Put(&r.cur.buf)
		r.cur = nil
	}
	for {
		select {
		case p := <-r.full:
			aheadBufs.Put(&p.buf)
		case p := <-r.free:
			aheadBufs.Put(&p.buf)
		default:
			return
		}
	}
}
