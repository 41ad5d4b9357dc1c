package chunk

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// DefaultChunkSize is the chunk size when SplitOptions leaves it zero.
const DefaultChunkSize = 8 << 20

// DefaultConcurrency is how many chunks Split uploads at once by default.
const DefaultConcurrency = 4

// SplitOptions tune Split. Zero values mean the defaults.
type SplitOptions struct {
	ChunkSize   int
	Concurrency int
	// SizeHint is the stream's length when known (-1 or 0: unknown). It
	// only sizes buffers, so that a small file does not cost a whole chunk
	// buffer.
	SizeHint int64
	// Now stamps chunk mtimes; nil means time.Now.
	Now func() time.Time
	// NoMD5 skips hashing the stream (SplitResult.MD5 is nil) for callers
	// that hash what matters to them elsewhere (encrypted objects).
	NoMD5 bool
	// Encrypt seals every chunk under a key of its own (Chunk.CipherKey);
	// MD5 and ETags stay those of the plaintext.
	Encrypt bool
}

// SplitResult is what Split stored.
type SplitResult struct {
	Chunks []Chunk // in file order, offsets starting at the base offset
	Size   int64   // bytes read from the stream
	MD5    []byte  // MD5 of the whole stream
}

// Split reads r to its end, cutting it into chunks of ChunkSize bytes that
// it stores through p, up to Concurrency at a time, with offsets starting
// at base. It holds at most Concurrency+1 chunk buffers. An empty stream
// stores no chunk.
//
// On error it returns the chunks that were stored anyway in the result, so
// that the caller can delete them.
func Split(ctx context.Context, p Putter, r io.Reader, base int64, opts SplitOptions) (SplitResult, error) {
	chunkSize := opts.ChunkSize
	if chunkSize <= 0 {
		chunkSize = DefaultChunkSize
	}
	conc := opts.Concurrency
	if conc <= 0 {
		conc = DefaultConcurrency
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	// A small stream must not cost a whole chunk buffer: start with one of
	// the hinted size (+1 to see EOF without a second buffer), or 64 KiB+1
	// when the size is unknown, and grow towards full chunks if it is longer.
	bufSize := min(chunkSize, 64<<10+1)
	if opts.SizeHint > 0 {
		bufSize = int(min(opts.SizeHint+1, int64(chunkSize)))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		stored []Chunk
		first  error
	)
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
			cancel()
		}
		mu.Unlock()
	}
	free := make(chan []byte, conc) // returned buffers
	slots := make(chan struct{}, conc)
	whole := md5.New()
	var pos int64
	var pending []byte // bytes read past a small buffer (hint was wrong)
	var oneMD5 []byte  // MD5 of a single-chunk stream
	for {
		var buf []byte
		select {
		case buf = <-free:
		default:
			buf = make([]byte, bufSize)
		}
		n := copy(buf, pending)
		pending = nil
		m, err := io.ReadFull(r, buf[n:])
		n += m
		if err != nil && err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF) {
			fail(fmt.Errorf("chunk: read stream: %w", err))
			break
		}
		eof := err != nil
		if !eof && bufSize < chunkSize {
			// The size hint was low (or missing): grow the buffer 4× at a
			// time up to a whole chunk, so that a stream of a few hundred
			// KiB does not cost an 8 MiB buffer (nor its zeroing). The
			// bytes read so far carry over; this buffer was never shared.
			pending = buf[:n]
			bufSize = min(bufSize*4, chunkSize)
			continue
		}
		if n == 0 {
			break
		}
		// A stream of one chunk is hashed once: its chunk ETag is its MD5.
		// The chunks of a longer stream get no ETag of their own (see
		// Chunk.ETag): the stream's MD5 is the one that matters.
		var single []byte
		switch {
		case opts.NoMD5:
		case eof && pos == 0:
			sum := md5.Sum(buf[:n])
			single = sum[:]
			oneMD5 = single
		default:
			whole.Write(buf[:n])
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			fail(ctx.Err())
			break
		}
		off := base + pos
		pos += int64(n)
		wg.Add(1)
		go func(data, full, sum []byte) {
			defer wg.Done()
			defer func() {
				select { // keep the buffer for the next chunk unless enough are kept
				case free <- full:
				default:
				}
				<-slots
			}()
			fid, key, err := PutChunk(ctx, p, data, opts.Encrypt)
			if err != nil {
				fail(fmt.Errorf("chunk: store chunk at %d: %w", off, err))
				return
			}
			mu.Lock()
			c := Chunk{FID: fid, Offset: off, Size: int64(len(data)), Mtime: now().UnixNano(), CipherKey: key}
			if sum != nil {
				c.ETag = hex.EncodeToString(sum)
			}
			stored = append(stored, c)
			mu.Unlock()
		}(buf[:n], buf, single)
		if eof {
			break
		}
	}
	wg.Wait()
	sortByOffset(stored)
	res := SplitResult{Chunks: stored, Size: pos, MD5: oneMD5}
	if res.MD5 == nil && !opts.NoMD5 {
		res.MD5 = whole.Sum(nil)
	}
	return res, first
}

func sortByOffset(cs []Chunk) {
	// Insertion sort: uploads finish nearly in order.
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && cs[j].Offset < cs[j-1].Offset; j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}
