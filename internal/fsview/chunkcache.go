package fsview

import (
	"bytes"
	"container/list"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kelpfs/kelp/internal/chunk"
)

// chunkCache keeps whole chunks in files of a local directory, least
// recently used evicted first, so that their bytes take at most limit
// bytes. A chunk's file id names a content that never changes, so a cached
// chunk is never stale: nothing is invalidated, only evicted. What is in
// the directory when the view starts is used (the cache survives a restart
// of the mount); what is there beyond the limit is evicted then.
//
// Each chunk is one file named after its file id ("3,01637037d6" is
// "3_01637037d6"), written to a temporary name and renamed, so a crash
// never leaves a partial chunk under a chunk's name.
type chunkCache struct {
	dir   string
	limit int64

	mu    sync.Mutex
	size  int64
	lru   *list.List               // front: most recently used; values *cached
	items map[string]*list.Element // by file id

	hits, misses atomic.Int64
}

type cached struct {
	fid  string
	size int64
}

// chunkCacheTemp marks files being written (removed at start).
const chunkCacheTemp = ".tmp-"

func openChunkCache(dir string, limit int64) (*chunkCache, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("fsview: chunk cache size must be positive")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("fsview: chunk cache: %w", err)
	}
	c := &chunkCache{dir: dir, limit: limit, lru: list.New(), items: map[string]*list.Element{}}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("fsview: chunk cache: %w", err)
	}
	type found struct {
		fid   string
		size  int64
		mtime int64
	}
	var fs []found
	for _, de := range des {
		name := de.Name()
		if strings.HasPrefix(name, chunkCacheTemp) {
			os.Remove(filepath.Join(dir, name))
			continue
		}
		if !de.Type().IsRegular() || !strings.Contains(name, "_") {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue
		}
		fs = append(fs, found{strings.Replace(name, "_", ",", 1), info.Size(), info.ModTime().UnixNano()})
	}
	// Oldest first, so that the newest end up at the front.
	sort.Slice(fs, func(i, j int) bool { return fs[i].mtime < fs[j].mtime })
	for _, f := range fs {
		c.items[f.fid] = c.lru.PushFront(&cached{f.fid, f.size})
		c.size += f.size
	}
	c.mu.Lock()
	c.evictLocked()
	c.mu.Unlock()
	return c, nil
}

func (c *chunkCache) file(fid string) string {
	return filepath.Join(c.dir, strings.Replace(fid, ",", "_", 1))
}

// validFID keeps file ids that could escape the directory out of it.
func validFID(fid string) bool {
	return fid != "" && !strings.ContainsAny(fid, "/\\\x00") && !strings.HasPrefix(fid, ".")
}

// open returns the cached chunk fid, or nil.
func (c *chunkCache) open(fid string) *os.File {
	c.mu.Lock()
	el, ok := c.items[fid]
	if ok {
		c.lru.MoveToFront(el)
	}
	c.mu.Unlock()
	if !ok {
		c.misses.Add(1)
		return nil
	}
	f, err := os.Open(c.file(fid))
	if err != nil { // removed from under us: forget it
		c.mu.Lock()
		if el, ok := c.items[fid]; ok {
			c.size -= el.Value.(*cached).size
			c.lru.Remove(el)
			delete(c.items, fid)
		}
		c.mu.Unlock()
		c.misses.Add(1)
		return nil
	}
	c.hits.Add(1)
	return f
}

// put stores chunk fid; a chunk larger than the cache is not kept.
func (c *chunkCache) put(fid string, data []byte) {
	n := int64(len(data))
	if n > c.limit || !validFID(fid) {
		return
	}
	c.mu.Lock()
	_, ok := c.items[fid]
	c.mu.Unlock()
	if ok {
		return
	}
	tmp, err := os.CreateTemp(c.dir, chunkCacheTemp)
	if err != nil {
		return
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), c.file(fid)) != nil {
		os.Remove(tmp.Name())
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[fid]; ok {
		return
	}
	c.items[fid] = c.lru.PushFront(&cached{fid, n})
	c.size += n
	c.evictLocked()
}

func (c *chunkCache) evictLocked() {
	for c.size > c.limit {
		el := c.lru.Back()
		if el == nil {
			return
		}
		v := el.Value.(*cached)
		c.lru.Remove(el)
		delete(c.items, v.fid)
		c.size -= v.size
		os.Remove(c.file(v.fid))
	}
}

// used is the bytes the cache holds.
func (c *chunkCache) used() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
}

// cachedBlobs reads chunks through the cache: a miss fetches the whole
// chunk once and keeps it; later reads of any range of it are local.
type cachedBlobs struct {
	inner chunk.Opener
	c     *chunkCache
}

func (b *cachedBlobs) Open(ctx context.Context, fid string, off, n int64) (io.ReadCloser, error) {
	if n == 0 {
		return io.NopCloser(eof{}), nil
	}
	if f := b.c.open(fid); f != nil {
		return sectionOf(f, off, n)
	}
	rc, err := b.inner.Open(ctx, fid, 0, -1)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return nil, err
	}
	b.c.put(fid, data)
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	data = data[off:]
	if n > 0 && n < int64(len(data)) {
		data = data[:n]
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// sectionOf reads n bytes (n < 0: to the end) of f from off, closing f
// with the reader.
func sectionOf(f *os.File, off, n int64) (io.ReadCloser, error) {
	if n < 0 {
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		n = max(st.Size()-off, 0)
	}
	return struct {
		io.Reader
		io.Closer
	}{io.NewSectionReader(f, off, n), f}, nil
}
