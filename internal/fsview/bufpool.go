package fsview

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// Buffers of file data (write-back blocks, uploads, read-ahead) come from
// pools by power-of-two size class and go back once nothing refers to them:
// a fresh buffer from make is zeroed by the runtime, and for a chunk-sized
// block that clearing cost more than the write it served (an 8 MiB block
// cleared for each 1 MiB file copied in). A pooled buffer holds stale bytes:
// the code using one keeps track of what it wrote (block.dirty, a read fills
// its buffer whole, holes cleared by chunk.Reader).
const (
	minPoolShift = 16 // 64 KiB: smaller buffers are made and left to the GC
	maxPoolShift = 27 // 128 MiB
)

var bufPools [maxPoolShift + 1]sync.Pool

// sizeClass is the pool index of a buffer of n bytes (-1: not pooled).
func sizeClass(n int) int {
	if n <= 0 {
		return -1
	}
	s := bits.Len(uint(n - 1))
	if s < minPoolShift || s > maxPoolShift {
		return -1
	}
	return s
}

// getBuf returns a buffer of length n with capacity at least n, its content
// undefined.
func getBuf(n int) []byte {
	c := sizeClass(n)
	if c < 0 {
		return make([]byte, n)
	}
	if b, ok := bufPools[c].Get().(*[]byte); ok {
		return (*b)[:n]
	}
	return make([]byte, n, 1<<c)
}

// putBuf gives b back for reuse; nothing may refer to it after. A buffer
// not from getBuf (capacity not a pooled class) is left to the GC.
func putBuf(b []byte) {
	c := sizeClass(cap(b))
	if c < 0 || cap(b) != 1<<c {
		return
	}
	b = b[:0]
	bufPools[c].Put(&b)
}

// sharedBuf is a pooled buffer of read-ahead data that a READ reply may
// send from directly (File.ReadShared) while the file has already moved on
// to the next buffer: it goes back to the pool when the last holder lets
// go. One that is never let go (a fetch dropped on its way, a reply the
// FUSE library never sent) is left to the GC, never reused early.
type sharedBuf struct {
	b    []byte
	refs atomic.Int32
}

// newSharedBuf returns a buffer of n bytes with one reference, its content
// undefined.
func newSharedBuf(n int) *sharedBuf {
	s := &sharedBuf{b: getBuf(n)}
	s.refs.Store(1)
	return s
}

func (s *sharedBuf) hold() { s.refs.Add(1) }

// release lets go of one reference; nil is a no-op.
func (s *sharedBuf) release() {
	if s == nil {
		return
	}
	switch r := s.refs.Add(-1); {
	case r == 0:
		putBuf(s.b)
		s.b = nil
	case r < 0:
		panic("fsview: shared buffer released once too often")
	}
}
