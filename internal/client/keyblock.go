package client

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// Key blocks let a busy writer (a filer, an S3 gateway) pay one assign round
// trip for many files: Config.AssignBatch keys are reserved at once with
// count=N and handed out one by one. Each file gets a fresh random cookie,
// which the volume server accepts for a new key, so neighbouring file ids
// stay unguessable. A block is dropped when an upload from it fails (the
// volume may be full, read-only or gone) and after keyBlockLifetime, so that
// writes keep following the master's choice of volumes.

const keyBlockLifetime = 5 * time.Second

// keyBlock is the unused rest of one reserved range of keys.
type keyBlock struct {
	a       Assignment // FID.Key is the next key to hand out
	end     uint64     // one past the last reserved key
	expires time.Time
}

type keyBlocks struct {
	mu     sync.Mutex
	blocks map[AssignRequest]*keyBlock
}

// assignOne returns an assignment for one file, from a reserved block when
// Config.AssignBatch allows.
func (c *Client) assignOne(ctx context.Context, until time.Time, req AssignRequest) (Assignment, error) {
	if c.assignBatch <= 1 || req.Count > 1 {
		return c.assign(ctx, until, req)
	}
	if a, ok := c.keys.take(req, c.now()); ok {
		return a, nil
	}
	batch := req
	batch.Count = uint64(c.assignBatch)
	a, err := c.assign(ctx, until, batch)
	if err != nil {
		return Assignment{}, err
	}
	c.keys.put(req, a, c.now().Add(keyBlockLifetime))
	a.Count = 1
	return a, nil
}

// take hands out the next key of req's block, with a new cookie.
func (k *keyBlocks) take(req AssignRequest, now time.Time) (Assignment, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	b := k.blocks[req]
	if b == nil || b.a.FID.Key >= b.end || now.After(b.expires) {
		delete(k.blocks, req)
		return Assignment{}, false
	}
	a := b.a
	a.FID.Cookie = rand.Uint32()
	a.Count = 1
	b.a.FID.Key++
	return a, true
}

// put keeps the rest of a freshly reserved block (its first key is in use).
func (k *keyBlocks) put(req AssignRequest, a Assignment, expires time.Time) {
	if a.Count <= 1 {
		return
	}
	b := &keyBlock{a: a, end: a.FID.Key + a.Count, expires: expires}
	b.a.FID.Key++
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.blocks == nil {
		k.blocks = map[AssignRequest]*keyBlock{}
	}
	k.blocks[req] = b
}

// drop forgets req's block if it is on volume vol: an upload to it failed.
func (k *keyBlocks) drop(req AssignRequest, vol uint32) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if b := k.blocks[req]; b != nil && b.a.FID.Volume == vol {
		delete(k.blocks, req)
	}
}
