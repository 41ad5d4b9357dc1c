package fsview

import (
	"context"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// metaCache keeps the entries the view looked up or listed, so that a
// stat after a listing (ls -l) or a repeated lookup costs no round trip. It
// is only used while the filer's event stream (SubscribeMetadata) is
// connected: every change made anywhere evicts the paths it touches as soon
// as its event arrives, and the view evicts its own changes at once. When
// the stream breaks the cache is emptied and bypassed until it is back.
type metaCache struct {
	mu      sync.Mutex
	live    bool
	gen     uint64 // counts evictions: an answer older than one is not stored
	entries map[string]*filerpb.Entry
	// children indexes the cached paths by parent directory, so that
	// evicting a directory costs its cached subtree, not the whole cache.
	children map[string]map[string]bool
	rpcs     atomic.Int64 // lookups that went to the filer (tests)
}

// Entries beyond this are not cached (memory bound).
const maxCached = 100_000

func newMetaCache() *metaCache {
	return &metaCache{entries: map[string]*filerpb.Entry{}, children: map[string]map[string]bool{}}
}

func (c *metaCache) get(p string) (*filerpb.Entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live {
		return nil, false
	}
	e, ok := c.entries[p]
	if !ok {
		return nil, false
	}
	return cloneEntry(e), true
}

// generation is read before asking the filer; put stores the answer only
// if nothing was evicted since, so a stale answer never lands in the cache.
func (c *metaCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

func (c *metaCache) put(gen uint64, es ...*filerpb.Entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live || gen != c.gen {
		return
	}
	for _, e := range es {
		if len(c.entries) >= maxCached {
			return
		}
		c.entries[e.Path] = cloneEntry(e)
		dir := path.Dir(e.Path)
		if c.children[dir] == nil {
			c.children[dir] = map[string]bool{}
		}
		c.children[dir][e.Path] = true
	}
}

// evict drops p and everything cached under it.
func (c *metaCache) evict(paths ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for _, p := range paths {
		if p == "" {
			continue
		}
		if sib := c.children[path.Dir(p)]; sib != nil {
			delete(sib, p)
		}
		c.evictTree(p)
	}
}

func (c *metaCache) evictTree(p string) {
	delete(c.entries, p)
	for ch := range c.children[p] {
		if ch != p { // the root is its own parent
			c.evictTree(ch)
		}
	}
	delete(c.children, p)
}

func (c *metaCache) setLive(live bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live = live
	c.gen++
	clear(c.entries)
	clear(c.children)
}

// follow applies the filer's events to the cache from seq on, reconnecting
// after a break, until ctx ends.
func (fs *FS) follow(ctx context.Context, seq uint64) {
	for ctx.Err() == nil {
		seq = fs.followOnce(ctx, seq)
		fs.cache.setLive(false)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		// Events may have been missed (or trimmed) meanwhile: start over from
		// the newest one with an empty cache.
		if conf, err := fs.filer.GetConfiguration(ctx, &filerpb.GetConfigurationRequest{}); err == nil {
			seq = conf.LastSeq
		}
	}
}

func (fs *FS) followOnce(ctx context.Context, seq uint64) uint64 {
	stream, err := fs.filer.SubscribeMetadata(ctx, &filerpb.SubscribeMetadataRequest{SinceSeq: seq})
	if err != nil {
		return seq
	}
	// The stream replays every event after seq, however late the server
	// starts it, so the cache can be trusted from now on: an answer cached
	// now is evicted by the event of any change after seq.
	fs.cache.setLive(true)
	for {
		ev, err := stream.Recv()
		if err != nil {
			if ctx.Err() == nil {
				fs.log.Debug("fsview: metadata stream broke; caching off until it is back", "err", err)
			}
			return seq
		}
		seq = ev.Seq
		fs.cache.evict(ev.GetOldEntry().GetPath(), ev.GetNewEntry().GetPath())
	}
}
