package client

import (
	"context"
	"math/bits"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Volume server health: reads try the replicas of a volume healthiest
// first, so that a server that stopped answering (frozen, overloaded, behind
// a cut link) costs one short wait once, not on every read.
//
// Every request to a volume server reports its outcome here (doVolume): the
// time its answer took to begin, or a failure (no answer in time, a
// connection error, a 5xx). A failure makes the server suspect: it is tried
// after every healthy replica until it has answered again. Nothing but a
// probe would ever tell that it has, since reads no longer go to it, so a
// suspect server is probed (GET /healthz) in the background, at most one
// probe at a time, after a pause that doubles with each failure
// (probeAfterMin..probeAfterMax). Any answer to a probe, or to a request sent
// to it as a last resort, makes it healthy again.
//
// Among healthy servers the order is that of the lookup, except that a
// server whose answers have taken clearly longer (a moving average in a
// higher power-of-two class of 16 ms: <16, <32, <64 ms..., so that the
// jitter of a busy machine or LAN does not reorder replicas) goes after faster ones: a replica in a
// far data center or on a busy disk is read from only when it must be.

const (
	latencyClass  = 16 * time.Millisecond
	probeAfterMin = 500 * time.Millisecond
	probeAfterMax = 30 * time.Second
)

type healthTable struct {
	mu      sync.Mutex
	servers map[string]*serverHealth // by "host:port"
}

type serverHealth struct {
	latency   time.Duration // moving average of the time to the answer's start
	failures  int           // consecutive failures; > 0 means suspect
	nextProbe time.Time
	probing   bool
}

// serverKey is the table's key for a server given as "host:port" (a
// request's URL.Host) or as a URL (a location may carry a scheme).
func serverKey(server string) string {
	if i := strings.Index(server, "://"); i >= 0 {
		server = server[i+3:]
	}
	return strings.TrimRight(server, "/")
}

// get returns server's entry, creating it; h.mu must be held.
func (h *healthTable) get(server string) *serverHealth {
	server = serverKey(server)
	s := h.servers[server]
	if s == nil {
		if h.servers == nil {
			h.servers = make(map[string]*serverHealth)
		}
		s = &serverHealth{}
		h.servers[server] = s
	}
	return s
}

// answered records that server began an answer after d. Only reads feed
// the latency: a write's answer waits for an fsync (and for every replica),
// which says nothing about how fast the server reads, and would rank the
// primary of the last write behind a replica never asked.
func (h *healthTable) answered(server string, d time.Duration, read bool) {
	h.mu.Lock()
	s := h.get(server)
	s.failures = 0
	if !read {
		h.mu.Unlock()
		return
	}
	if s.latency == 0 {
		s.latency = d
	} else {
		s.latency += (d - s.latency) / 8
	}
	h.mu.Unlock()
}

// failed records that a request to server failed at now.
func (h *healthTable) failed(server string, now time.Time) {
	h.mu.Lock()
	s := h.get(server)
	s.failures++
	s.nextProbe = now.Add(probePause(s.failures))
	h.mu.Unlock()
}

func probePause(failures int) time.Duration {
	return min(probeAfterMin<<min(failures-1, 10), probeAfterMax)
}

// order returns locs healthiest first (see above): locs itself when it is
// in that order already, else a sorted copy. It also returns the suspect
// servers that are due for a probe, marked as being probed.
func (h *healthTable) order(locs []Location, now time.Time) (ordered []Location, probe []string) {
	if len(locs) < 2 {
		return locs, nil
	}
	var stack [4]int // the usual two or three replicas need no allocation
	ranks := stack[:0]
	h.mu.Lock()
	for _, l := range locs {
		s := h.servers[serverKey(l.URL)]
		r := 0
		if s != nil {
			// Suspects after every healthy server, then by latency class.
			r = bits.Len64(uint64(s.latency / latencyClass))
			if s.failures > 0 {
				r += 1 << 10
				if !s.probing && !now.Before(s.nextProbe) {
					s.probing = true
					probe = append(probe, l.URL)
				}
			}
		}
		ranks = append(ranks, r)
	}
	h.mu.Unlock()
	if slices.IsSorted(ranks) {
		return locs, probe
	}
	idx := make([]int, len(locs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return ranks[a] - ranks[b] })
	ordered = make([]Location, len(locs))
	for i, k := range idx {
		ordered[i] = locs[k]
	}
	return ordered, probe
}

// suspect reports whether server failed and has not answered since.
func (h *healthTable) suspect(server string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.servers[serverKey(server)]
	return s != nil && s.failures > 0
}

// probed ends a probe of server: ok means it answered.
func (h *healthTable) probed(server string, ok bool, now time.Time) {
	h.mu.Lock()
	s := h.get(server)
	s.probing = false
	if ok {
		s.failures = 0
	} else {
		s.failures++
		s.nextProbe = now.Add(probePause(s.failures))
	}
	h.mu.Unlock()
}

// orderLocations returns locs healthiest first (never modifying locs), and starts the
// probes that are due. Each probe is one GET /healthz bounded by
// Config.AnswerTimeout; its goroutine ends with it.
func (c *Client) orderLocations(locs []Location) []Location {
	ordered, probe := c.health.order(locs, time.Now())
	for _, server := range probe {
		go c.probe(server)
	}
	return ordered
}

func (c *Client) probe(server string) {
	ctx, cancel := context.WithTimeout(context.Background(), c.answerTimeout)
	defer cancel()
	ok := false
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL(server)+"/healthz", nil)
	if err == nil {
		var resp *http.Response
		if c.rt != nil {
			resp, err = c.rt.RoundTrip(req)
		} else {
			resp, err = c.hc.Do(req)
		}
		if err == nil {
			ok = resp.StatusCode < 500
			drainClose(resp.Body)
		}
	}
	c.log.Debug("client: probed a suspect volume server", "server", server, "answered", ok, "err", err)
	c.health.probed(server, ok, time.Now())
}
