package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kelpfs/kelp/internal/fid"
)

// AssignRequest asks the master for file ids. Zero fields are left to the
// master's defaults.
type AssignRequest struct {
	Count       uint64 // how many consecutive keys to reserve; 0 means 1
	Collection  string
	Replication string // "XYZ", see package replication
	TTL         string // see package ttl
	DataCenter  string // preferred data center
}

// Assignment is a file id and the volume server to write it to. With
// Count > 1 the ids FID.Key .. FID.Key+Count-1 (same cookie) are reserved.
type Assignment struct {
	FID       fid.FileID
	URL       string // "host:port" for cluster-internal traffic
	PublicURL string
	Count     uint64
	// Auth is the file token volume servers require when file ids are
	// signed: valid for FID and the Count-1 keys after it, for seconds.
	Auth string
}

// Location is one volume server holding a volume.
type Location struct {
	URL        string `json:"url"`
	PublicURL  string `json:"publicUrl"`
	DataCenter string `json:"dataCenter"`
	Rack       string `json:"rack"`
	// EcShards, for an erasure-coded volume: bit i set, shard i is there.
	// Any holder answers reads of any needle of the volume.
	EcShards uint32 `json:"ecShards,omitempty"`
	// Unreachable: the master cannot reach this copy's server now (its
	// probes fail or its heartbeat stream broke); such copies come last.
	Unreachable bool `json:"unreachable,omitempty"`
}

type cacheEntry struct {
	locs      []Location
	minCopies int
	expires   time.Time
}

// Assign asks the master for a file id, waiting up to Config.MasterWait
// for a master that can answer.
func (c *Client) Assign(ctx context.Context, req AssignRequest) (Assignment, error) {
	return c.assign(ctx, time.Now().Add(c.masterWait), req)
}

// assign is Assign with the time after which it stops retrying.
func (c *Client) assign(ctx context.Context, until time.Time, req AssignRequest) (Assignment, error) {
	var a Assignment
	err := c.masterGetUntil(ctx, until, assignPath(req), func(body []byte) (err error) {
		a, err = ParseAssignAnswer(body)
		return err
	})
	return a, err
}

// AssignPath is the path and query of the master's assign request for req.
func AssignPath(req AssignRequest) string { return assignPath(req) }

// ParseAssignAnswer decodes a master's 200 answer to /dir/assign.
func ParseAssignAnswer(body []byte) (Assignment, error) {
	var ans assignAnswer
	if err := decodeAssignAnswer(body, &ans); err != nil {
		return Assignment{}, fmt.Errorf("client: bad assign answer: %w", err)
	}
	id, err := fid.Parse(ans.FID)
	if err != nil {
		return Assignment{}, fmt.Errorf("client: assign answered a bad file id: %w", err)
	}
	if ans.URL == "" {
		return Assignment{}, fmt.Errorf("client: assign answered no url for %s", ans.FID)
	}
	if ans.Count == 0 {
		ans.Count = 1
	}
	return Assignment{FID: id, URL: ans.URL, PublicURL: ans.PublicURL, Count: ans.Count, Auth: ans.Auth}, nil
}

func assignPath(req AssignRequest) string {
	if req == (AssignRequest{}) {
		return "/dir/assign"
	}
	var b strings.Builder
	b.WriteString("/dir/assign")
	sep := byte('?')
	add := func(k, v string) {
		if v == "" {
			return
		}
		b.WriteByte(sep)
		sep = '&'
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(v))
	}
	if req.Count > 0 {
		add("count", strconv.FormatUint(req.Count, 10))
	}
	add("collection", req.Collection)
	add("replication", req.Replication)
	add("ttl", req.TTL)
	add("dataCenter", req.DataCenter)
	return b.String()
}

// Lookup returns the servers holding a volume, from the cache when fresh.
// The returned slice is the caller's.
func (c *Client) Lookup(ctx context.Context, volumeID uint32) ([]Location, error) {
	locs, _, err := c.lookup(ctx, volumeID)
	if err != nil {
		return nil, err
	}
	return append([]Location(nil), locs...), nil
}

// LookupWrite is Lookup for a replicated write: it also returns the volume's
// write policy, 0 when every copy must have the write before it is
// acknowledged (strict), N when N copies are enough (degraded).
func (c *Client) LookupWrite(ctx context.Context, volumeID uint32) ([]Location, int, error) {
	locs, _, err := c.lookup(ctx, volumeID)
	if err != nil {
		return nil, 0, err
	}
	c.mu.RLock()
	e, ok := c.cache[volumeID]
	c.mu.RUnlock()
	if !ok {
		return append([]Location(nil), locs...), 0, nil // invalidated meanwhile: strict
	}
	return append([]Location(nil), e.locs...), e.minCopies, nil
}

// lookup is Lookup without the copy; cached reports whether locs came from
// the cache. Callers must not modify locs.
func (c *Client) lookup(ctx context.Context, volumeID uint32) (locs []Location, cached bool, err error) {
	c.mu.RLock()
	e, ok := c.cache[volumeID]
	c.mu.RUnlock()
	if ok && c.now().Before(e.expires) {
		return e.locs, true, nil
	}
	ans, err := c.lookupMaster(ctx, volumeID)
	if err != nil {
		return nil, false, err
	}
	c.mu.Lock()
	c.cache[volumeID] = cacheEntry{locs: ans.Locations, minCopies: ans.MinCopies, expires: c.now().Add(c.lookupTTL)}
	c.mu.Unlock()
	return ans.Locations, false, nil
}

// Invalidate drops a volume's cached locations, so the next request asks the
// master again. Reads and deletes call it on failure; callers that learn of a
// move some other way may too.
func (c *Client) Invalidate(volumeID uint32) {
	c.mu.Lock()
	delete(c.cache, volumeID)
	c.mu.Unlock()
}

type lookupAnswer struct {
	VolumeID  string     `json:"volumeId"`
	Locations []Location `json:"locations"`
	Error     string     `json:"error"`
	MinCopies int        `json:"minCopies"`
}

func (c *Client) lookupMaster(ctx context.Context, volumeID uint32) (lookupAnswer, error) {
	var ans lookupAnswer
	path := "/dir/lookup?volumeId=" + strconv.FormatUint(uint64(volumeID), 10)
	err := c.masterGet(ctx, path, func(body []byte) error {
		return json.Unmarshal(body, &ans)
	})
	if err != nil {
		return lookupAnswer{}, err
	}
	if len(ans.Locations) == 0 {
		// An answer with no location is as good as "unknown volume".
		return lookupAnswer{}, &HTTPError{Method: http.MethodGet, URL: path, Status: http.StatusNotFound,
			Message: "volume " + strconv.FormatUint(uint64(volumeID), 10) + " has no location"}
	}
	return ans, nil
}

// maxLeaderHops bounds how many leader hints one round follows, so two
// confused masters pointing at each other cannot loop forever.
const maxLeaderHops = 3

// masterGet sends GET base+path to the masters and hands a 200 body to
// decode, retrying for up to Config.MasterWait while no master can answer.
func (c *Client) masterGet(ctx context.Context, path string, decode func(body []byte) error) error {
	return c.masterGetUntil(ctx, time.Now().Add(c.masterWait), path, decode)
}

// masterGetUntil is masterGet with the time after which no new round
// starts; Put shares one such bound between all its assigns.
//
// While the leader is down the masters are unreachable or answer 503 ("not
// the leader", "leader unreachable", a new leader still warming up), for
// about an election's time (0.5-2 s). A round asks every master once; after a
// round that only met such transient failures, masterGetUntil pauses with
// exponential backoff (25 ms doubling to 500 ms, jittered) and starts another,
// until one answers, ctx ends or until has passed. The first round always
// runs. Any other answer (200, 4xx, 500) ends it at once.
func (c *Client) masterGetUntil(ctx context.Context, until time.Time, path string, decode func(body []byte) error) error {
	start := time.Now()
	for round := 1; ; round++ {
		err := c.masterRound(ctx, path, decode)
		if err == nil || !masterTransient(ctx, err) {
			return err
		}
		pause := masterBackoff(round)
		if time.Now().Add(pause).After(until) {
			return fmt.Errorf("client: %s: no master could answer in %v (%d rounds): %w",
				path, time.Since(start).Round(time.Millisecond), round, err)
		}
		c.log.Debug("client: no master could answer, retrying", "path", path, "round", round, "pause", pause, "err", err)
		if cerr := sleepCtx(ctx, pause); cerr != nil {
			return fmt.Errorf("client: %s: %w (last error: %w)", path, cerr, err)
		}
	}
}

// masterTransient reports whether a round's failure may pass by itself: no
// master reachable, or a 502/503/504/429 answer (an election, a new leader
// warming up, no writable volume while one is grown).
func masterTransient(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if errors.Is(err, ErrNoMaster) {
		return true
	}
	var he *HTTPError
	return errors.As(err, &he) && transientStatus(he.Status)
}

func transientStatus(status int) bool {
	switch status {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusTooManyRequests:
		return true
	}
	return false
}

// masterBackoff is the pause after round n (n >= 1): 25 ms doubling to
// 500 ms, plus up to 50% jitter so that clients do not retry in step.
func masterBackoff(n int) time.Duration {
	d := min(25*time.Millisecond<<min(n-1, 5), 500*time.Millisecond)
	return d + rand.N(d/2+1)
}

// masterRound asks the masters once each. The master that answered last is
// tried first; the others follow in configured order after a connection
// error or a transient answer (a 503 from a follower that lost its leader
// says nothing of the others). Any other HTTP error is the cluster's answer
// and is returned as is. A {"leader": ...} hint moves the leader it names
// to the front. Redirects are followed by the http.Client, and the master
// that finally answered is remembered.
func (c *Client) masterRound(ctx context.Context, path string, decode func(body []byte) error) error {
	first := *c.current.Load()
	var stack [4]string // the usual one to three masters need no allocation
	candidates := append(stack[:0], first)
	for _, m := range c.masters {
		if m != first {
			candidates = append(candidates, m)
		}
	}
	var errs []error
	var transient *HTTPError // the last 5xx/429 answer of this round
	hops := 0
	for i := 0; i < len(candidates); i++ {
		base := candidates[i]
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return fmt.Errorf("client: master request: %w", err)
		}
		resp, err := c.doMaster(req)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("client: master %s: %w", base, ctx.Err())
			}
			c.log.Debug("client: master unreachable, trying next", "master", base, "err", err)
			errs = append(errs, err)
			continue
		}
		answered := resp.Request.URL.Scheme + "://" + resp.Request.URL.Host
		if resp.StatusCode != http.StatusOK {
			he, leader := c.httpError(resp)
			if leader != "" && hops < maxLeaderHops {
				if lb := baseURL(leader); lb != answered {
					hops++
					c.log.Debug("client: following leader hint", "from", answered, "leader", lb)
					candidates = append(candidates[:i+1], append([]string{lb}, candidates[i+1:]...)...)
					continue
				}
			}
			if transientStatus(he.Status) {
				c.log.Debug("client: master cannot answer now, trying next", "master", answered, "err", he)
				transient = he
				continue
			}
			c.remember(answered)
			return he
		}
		b, err := c.readAnswer(resp)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		err = decode(b.Bytes())
		c.putBuf(b)
		if err != nil {
			return fmt.Errorf("client: master %s: bad answer to %s: %w", answered, path, err)
		}
		c.remember(answered)
		return nil
	}
	if transient != nil {
		return transient
	}
	return fmt.Errorf("%w: %w", ErrNoMaster, errors.Join(errs...))
}

// remember makes base the first master tried next time.
func (c *Client) remember(base string) {
	if cur := c.current.Load(); *cur != base {
		c.current.Store(&base)
	}
}

// MasterGetJSON decodes the answer of a master's GET path (such as
// "/dir/status") into v, with the same retries as the client's own calls.
func (c *Client) MasterGetJSON(ctx context.Context, path string, v any) error {
	return c.masterGet(ctx, path, func(body []byte) error { return json.Unmarshal(body, v) })
}

// readToken asks a master for a read token of id (GET /dir/readtoken).
func (c *Client) readToken(ctx context.Context, id fid.FileID) (string, error) {
	var ans struct {
		Auth string `json:"auth"`
	}
	err := c.masterGet(ctx, "/dir/readtoken?fileId="+id.String(), func(body []byte) error { return json.Unmarshal(body, &ans) })
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	if ans.Auth == "" {
		return "", fmt.Errorf("read token: the master answered none")
	}
	return ans.Auth, nil
}
