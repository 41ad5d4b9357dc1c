package volumeserver

import (
	"sync"

	"github.com/kelpfs/kelp/internal/erasure"
)

// blockCache keeps blocks of EC shards that had to be reconstructed (their
// shard lost or unreadable), so that the next read of the same block —
// another small needle in it, or the same one again — is served from memory
// instead of k remote range reads. EC volumes never change and volume ids
// are never reused, so an entry stays right; the cache is bounded by bytes
// and evicts the oldest blocks first.
type blockCache struct {
	mu    sync.Mutex
	limit int
	size  int
	m     map[blockKey][]byte
	order []blockKey // insertion order, for eviction
}

type blockKey struct {
	vid   uint32
	shard int
	block int64
}

// ecCacheBytes bounds the reconstructed blocks a volume server keeps.
const ecCacheBytes = 64 << 20

func newBlockCache(limit int) *blockCache {
	return &blockCache{limit: limit, m: map[blockKey][]byte{}}
}

// put stores whole blocks b of shard starting at off (a block boundary).
func (c *blockCache) put(vid uint32, shard int, off int64, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for p := 0; p+erasure.BlockSize <= len(b); p += erasure.BlockSize {
		k := blockKey{vid, shard, (off + int64(p)) / erasure.BlockSize}
		if _, ok := c.m[k]; !ok {
			c.order = append(c.order, k)
			c.size += erasure.BlockSize
		}
		c.m[k] = append([]byte(nil), b[p:p+erasure.BlockSize]...)
	}
	for c.size > c.limit && len(c.order) > 0 {
		old := c.order[0]
		c.order = c.order[1:]
		if _, ok := c.m[old]; ok {
			delete(c.m, old)
			c.size -= erasure.BlockSize
		}
	}
}

// get returns [off, off+n) of shard if every block of it is cached.
func (c *blockCache) get(vid uint32, shard int, off, n int64) ([]byte, bool) {
	if n <= 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	first, last := off/erasure.BlockSize, (off+n-1)/erasure.BlockSize
	out := make([]byte, 0, n)
	for blk := first; blk <= last; blk++ {
		b, ok := c.m[blockKey{vid, shard, blk}]
		if !ok {
			return nil, false
		}
		lo, hi := int64(0), int64(erasure.BlockSize)
		if blk == first {
			lo = off - blk*erasure.BlockSize
		}
		if blk == last {
			hi = off + n - blk*erasure.BlockSize
		}
		out = append(out, b[lo:hi]...)
	}
	return out, true
}

// bytes is the size of the cached blocks (for the metrics).
func (c *blockCache) bytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
}
