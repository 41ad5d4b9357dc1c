package fsview

import (
	"context"
	"path"
	"slices"
	"strings"
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
	gen     uint64 // counts evictions (see put)
	entries map[string]*filerpb.Entry
	// evicted is the generation of the latest eviction of each path
	// evicted lately; evictions lists them in order, so that the oldest
	// can be forgotten. An answer begun before floor is not stored: the
	// evictions since then are no longer all known.
	evicted   map[string]uint64
	evictions []eviction
	floor     uint64
	// children indexes the cached paths by parent directory, so that
	// evicting a directory costs its cached subtree, not the whole cache.
	children map[string]map[string]bool
	rpcs     atomic.Int64 // lookups that went to the filer (tests)

	// dirs holds the names in the directories whose whole listing is
	// known, kept up to date by the events: a name not there does not
	// exist, and its lookup costs no round trip (a create's LOOKUP first).
	dirs map[string]map[string]bool
	// listing: the listings (or mkdirs) on their way, each dirtied by an
	// event of its directory or a child meanwhile, which makes it untrusted.
	listing map[*listToken]bool
	// own counts this view's changes of each path whose events have not
	// arrived yet: until they have, dirs may not show them, and lookups of
	// the path ask the filer.
	own map[string]int
	// arriving counts this view's renames onto each path whose events
	// have not arrived yet. Unlike own it is counted down only by an
	// event that makes the path: a rename over a file is logged as the
	// file's deletion and then the move, and between the two the name is
	// missing from dirs while the move is still to come.
	arriving map[string]int
	negHits  atomic.Int64 // lookups answered "no such name" from dirs
}

// eviction is one path evicted, at generation gen.
type eviction struct {
	path string
	gen  uint64
}

// maxEvictions is how many evictions put can check an answer against: an
// answer that took longer than that many (a listing of a huge directory
// while another client writes fast) is not stored.
const maxEvictions = 4096

// listToken is one listing (or mkdir) of a directory on its way.
type listToken struct {
	dir   string
	dirty bool
}

// changedBy reports whether an event that removes old and makes new ("" for
// none; equal for an update) may change the names in t.dir: a child made,
// changed or removed, or t.dir itself removed, moved or replaced. The
// creation of t.dir and an update of it leave its names as they were: a
// mkdir's own event, which may arrive before the mkdir's answer, must not
// cost the new directory its known (empty) listing.
func (t *listToken) changedBy(old, new string) bool {
	for _, p := range []string{old, new} {
		if p == "" {
			continue
		}
		if path.Dir(p) == t.dir && p != t.dir {
			return true
		}
		if p == t.dir && old != "" && old != new {
			return true
		}
	}
	return false
}

// Complete listings beyond this are not kept (each eviction scans them).
const maxListed = 256

// Entries beyond this are not cached (memory bound).
const maxCached = 100_000

func newMetaCache() *metaCache {
	return &metaCache{entries: map[string]*filerpb.Entry{}, children: map[string]map[string]bool{},
		dirs: map[string]map[string]bool{}, listing: map[*listToken]bool{}, own: map[string]int{},
		arriving: map[string]int{}, evicted: map[string]uint64{}}
}

// absent reports whether full is known not to exist: its directory's
// listing is complete and lacks it, and no change of it made here is
// still to be seen in the events.
func (c *metaCache) absent(full string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live || c.own[full] > 0 || c.arriving[full] > 0 {
		return false
	}
	names, ok := c.dirs[path.Dir(full)]
	if !ok || names[path.Base(full)] {
		return false
	}
	c.negHits.Add(1)
	return true
}

// listed returns the names in dir in order, if its whole listing is known
// (nil if not): a snapshot, not kept up to date.
func (c *metaCache) listed(dir string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	names, ok := c.dirs[dir]
	if !c.live || !ok {
		return nil
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// beginList starts a listing of dir (or a mkdir making it).
func (c *metaCache) beginList(dir string) *listToken {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &listToken{dir: dir, dirty: !c.live}
	c.listing[t] = true
	return t
}

// endList ends t; with ok, names is dir's whole content, kept while
// nothing touched dir during the listing.
func (c *metaCache) endList(t *listToken, ok bool, names []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.listing, t)
	if !ok || t.dirty || !c.live || len(c.dirs) >= maxListed {
		return
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	c.dirs[t.dir] = set
}

// beginOwn counts a change of paths made here; endOwn with its outcome.
func (c *metaCache) beginOwn(paths ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range paths {
		c.own[p]++
		c.dropListed(p)
	}
}

// moving marks the listings of paths and of directories under them on
// their way as untrusted: a rename or delete made here changes them.
func (c *metaCache) moving(paths ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for t := range c.listing {
		for _, p := range paths {
			if t.dir == p || strings.HasPrefix(t.dir, p+"/") {
				t.dirty = true
			}
		}
	}
}

func (c *metaCache) endOwn(err error, paths ...string) {
	if err == nil {
		return // counted down by its event
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range paths {
		countDown(c.own, p)
	}
}

// beginRename counts a rename made here; endRename with its outcome.
func (c *metaCache) beginRename(from, to string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.own[from]++
	c.arriving[to]++
	c.dropListed(from)
	c.dropListed(to)
}

func (c *metaCache) endRename(err error, from, to string) {
	if err == nil {
		return // counted down by its events
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	countDown(c.own, from)
	countDown(c.arriving, to)
}

// countDown takes one from counts[p], forgetting p at zero.
func countDown(counts map[string]int, p string) {
	if counts[p] > 1 {
		counts[p]--
	} else {
		delete(counts, p)
	}
}

// unlist forgets the complete listing of dir, if kept.
func (c *metaCache) unlist(dir string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.dirs, dir)
}

// dropListed forgets the complete listings of p and of the directories
// under it (p moved or removed: its subtree is not what was listed).
func (c *metaCache) dropListed(p string) {
	for d := range c.dirs {
		if d == p || strings.HasPrefix(d, p+"/") || p == "/" {
			delete(c.dirs, d)
		}
	}
}

// applyNames keeps the complete listings up to date with an event:
// old (if any) is removed and new (if any) is made, "" if none.
func (c *metaCache) applyNames(old, new string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for t := range c.listing {
		if t.changedBy(old, new) {
			t.dirty = true
		}
	}
	if old != "" {
		countDown(c.own, old)
	}
	if new != "" && new != old {
		if c.arriving[new] > 0 {
			countDown(c.arriving, new)
		} else {
			countDown(c.own, new)
		}
	}
	if old == new {
		return // an update: the names stay
	}
	if old != "" {
		c.dropListed(old)
		if names := c.dirs[path.Dir(old)]; names != nil {
			delete(names, path.Base(old))
		}
	}
	if new != "" {
		if old != "" {
			c.dropListed(new) // moved here: its subtree is the one moved
		}
		if names := c.dirs[path.Dir(new)]; names != nil {
			names[path.Base(new)] = true
		}
	}
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

// xattr is the value of extended attribute k of the cached entry of p,
// read in place (cached entries are never changed, only replaced): found
// says whether the entry has it, cached whether the cache could answer (p
// cached and not a hard link's name, whose xattrs are its content's).
func (c *metaCache) xattr(p, k string) (v []byte, found, cached bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live {
		return nil, false, false
	}
	e, ok := c.entries[p]
	if !ok || (!e.IsDir && len(e.Xattrs[xattrLink]) > 0) {
		return nil, false, false
	}
	v, found = e.Xattrs[k]
	if found {
		v = append([]byte(nil), v...)
	}
	return v, found, true
}

// generation is read before asking the filer; put stores an answer only
// if neither its path nor a directory above it was evicted since, so a
// stale answer never lands in the cache: the event of a change the answer
// missed may have been applied while the answer was on its way. Evictions
// of other paths do not matter, so that a listing or lookup still lands
// while another client writes elsewhere.
func (c *metaCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

func (c *metaCache) put(gen uint64, es ...*filerpb.Entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live || gen < c.floor {
		return
	}
	for _, e := range es {
		if len(c.entries) >= maxCached {
			return
		}
		if c.evictedSince(e.Path, gen) {
			continue
		}
		c.entries[e.Path] = cloneEntry(e)
		c.index(e.Path)
	}
}

// evictedSince reports whether p or a directory above it was evicted after
// generation gen (gen >= c.floor).
func (c *metaCache) evictedSince(p string, gen uint64) bool {
	for {
		if g, ok := c.evicted[p]; ok && g > gen {
			return true
		}
		if p == "/" || p == "." {
			return false
		}
		p = path.Dir(p)
	}
}

// noteEviction records the eviction of p at the current generation,
// forgetting the older half of the record when it is full.
func (c *metaCache) noteEviction(p string) {
	c.evicted[p] = c.gen
	c.evictions = append(c.evictions, eviction{p, c.gen})
	if len(c.evictions) < 2*maxEvictions {
		return
	}
	old := c.evictions[:maxEvictions]
	for _, ev := range old {
		if c.evicted[ev.path] == ev.gen {
			delete(c.evicted, ev.path)
		}
	}
	c.floor = old[len(old)-1].gen + 1
	c.evictions = append(c.evictions[:0], c.evictions[maxEvictions:]...)
}

// index records p under its parent, and each ancestor under its own, so
// that evicting any ancestor reaches p even when the directories between
// were never cached themselves (a path looked up directly, then its
// grandparent deleted recursively).
func (c *metaCache) index(p string) {
	for p != "/" && p != "." {
		dir := path.Dir(p)
		if c.children[dir][p] {
			return // the rest of the chain is there already
		}
		if c.children[dir] == nil {
			c.children[dir] = map[string]bool{}
		}
		c.children[dir][p] = true
		p = dir
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
		c.noteEviction(p)
		if sib := c.children[path.Dir(p)]; sib != nil {
			delete(sib, p)
		}
		c.evictTree(p)
	}
}

// evictEntry drops p alone, for an update of p: the entries under a
// directory whose attributes or times changed are as they were (a
// directory's times move with every change of its names, and its cached
// children must not go with them).
func (c *metaCache) evictEntry(p string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.noteEviction(p)
	delete(c.entries, p)
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
	c.floor = c.gen // every answer on its way predates what was cleared
	clear(c.evicted)
	c.evictions = c.evictions[:0]
	clear(c.entries)
	clear(c.children)
	clear(c.dirs)
	clear(c.own)
	for t := range c.listing {
		t.dirty = true
	}
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
		old, new := ev.GetOldEntry().GetPath(), ev.GetNewEntry().GetPath()
		if old == new {
			fs.cache.evictEntry(new)
		} else {
			fs.cache.evict(old, new)
		}
		fs.cache.applyNames(old, new)
	}
}
