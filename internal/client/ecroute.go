package client

import (
	"context"
	"encoding/binary"
	"io"
	"math/bits"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Reads from erasure-coded volumes. Any holder of an EC volume's shards
// answers a read of any of its needles, fetching the bytes from the holder
// of the needle's data shard when that is another server. To spare that
// hop, the client asks one holder once for the volume's route table
// (GET /ec/routes: runs of keys whose records start in the same data
// shard; about k entries) and sends each read first to a healthy holder of
// the needle's shard. EC volumes never change their layout, so a table is
// kept as long as the volume is erasure-coded; one that could not be had is
// asked for again after routeRetry.

const routeRetry = 30 * time.Second

// HeaderEC marks a volume server's answer to a read of an erasure-coded
// volume. A client whose cached locations of the volume say it is a normal
// one (they were looked up before ec.encode) asks the master again, at most
// once per ecRefreshEvery per volume: the server it reached still answers,
// but may have to fetch the needle from another holder first.
const HeaderEC = "X-Kelp-Ec"

const ecRefreshEvery = 5 * time.Second

type ecRoutes struct {
	keys    []uint64
	shards  []uint8
	expires time.Time // for a failed fetch: when to try again
}

// shardOf is the data shard holding key's record start, if known.
func (r *ecRoutes) shardOf(key uint64) (int, bool) {
	i := sort.Search(len(r.keys), func(i int) bool { return r.keys[i] > key })
	if i == 0 {
		return 0, false
	}
	return int(r.shards[i-1]), true
}

type routeCache struct {
	mu        sync.Mutex
	m         map[uint32]*ecRoutes
	refreshed map[uint32]time.Time // noteEC: when the locations were last dropped
}

// noteEC is called after a read of volume vol from loc answered with
// HeaderEC: stale locations (no shard bits) are dropped, so that the next
// read looks the volume up again.
func (c *Client) noteEC(vol uint32, loc Location) {
	if loc.EcShards != 0 {
		return
	}
	c.refreshEC(vol)
}

// refreshEC drops volume vol's cached locations, at most once per
// ecRefreshEvery.
func (c *Client) refreshEC(vol uint32) {
	now := c.now()
	rc := &c.routes
	rc.mu.Lock()
	if rc.refreshed == nil {
		rc.refreshed = map[uint32]time.Time{}
	}
	last, ok := rc.refreshed[vol]
	if ok && now.Sub(last) < ecRefreshEvery {
		rc.mu.Unlock()
		return
	}
	rc.refreshed[vol] = now
	rc.mu.Unlock()
	c.Invalidate(vol)
}

// preferEC returns, for a needle of an EC volume, the holder of its data
// shard, or "" when unknown. locs are the volume's locations.
func (c *Client) preferEC(ctx context.Context, vol uint32, key uint64, locs []Location) string {
	ec := false
	for _, l := range locs {
		ec = ec || l.EcShards != 0
	}
	if !ec {
		return ""
	}
	r := c.routes.get(vol)
	if r == nil || (r.keys == nil && c.now().After(r.expires)) {
		r = c.fetchRoutes(ctx, vol, locs)
	}
	shard, ok := r.shardOf(key)
	if !ok {
		return ""
	}
	held := false
	for _, l := range locs {
		if l.EcShards&(1<<shard) != 0 {
			held = true
			if !c.health.suspect(l.URL) {
				return l.URL
			}
		}
	}
	if !held {
		// Locations looked up while the shards were still being placed
		// (or moved since): ask again, now and then, rather than send
		// every read of this shard through another holder for the
		// lookup TTL.
		c.refreshEC(vol)
	}
	return c.reconstructorFor(shard, locs)
}

// reconstructorFor picks, for a data shard whose holder is down (or
// unknown), the live holder that reconstructs its reads: the same one for
// every read of that shard, so that the windows it rebuilds and caches
// serve the next reads of files there (another holder would rebuild them
// again), and one of those holding the most shards (fewest remote range
// reads). Different lost shards go to different holders among those. ""
// when no holder is healthy.
func (c *Client) reconstructorFor(shard int, locs []Location) string {
	var best []string
	most := 0
	for _, l := range locs {
		if l.EcShards == 0 || c.health.suspect(l.URL) {
			continue
		}
		n := bits.OnesCount32(l.EcShards)
		switch {
		case n > most:
			most, best = n, append(best[:0], l.URL)
		case n == most:
			best = append(best, l.URL)
		}
	}
	if len(best) == 0 {
		return ""
	}
	sort.Strings(best)
	return best[shard%len(best)]
}

func (rc *routeCache) get(vol uint32) *ecRoutes {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.m[vol]
}

func (rc *routeCache) put(vol uint32, r *ecRoutes) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.m == nil {
		rc.m = map[uint32]*ecRoutes{}
	}
	rc.m[vol] = r
}

// fetchRoutes asks the holders, healthiest first, for the route table.
func (c *Client) fetchRoutes(ctx context.Context, vol uint32, locs []Location) *ecRoutes {
	r := &ecRoutes{expires: c.now().Add(routeRetry)}
	for _, l := range c.orderLocations(locs) {
		if l.EcShards == 0 {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL(l.URL)+"/ec/routes?volume="+strconv.FormatUint(uint64(vol), 10), nil)
		if err != nil {
			break
		}
		resp, err := c.doVolume(req, c.failoverAfter)
		if err != nil {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, 9<<16+1))
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || len(b)%9 != 0 || len(b) > 9<<16 {
			continue
		}
		r.keys, r.shards = make([]uint64, 0, len(b)/9), make([]uint8, 0, len(b)/9)
		for p := 0; p < len(b); p += 9 {
			r.keys = append(r.keys, binary.BigEndian.Uint64(b[p:]))
			r.shards = append(r.shards, b[p+8])
		}
		break
	}
	c.routes.put(vol, r)
	return r
}
