package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kelpfs/kelp/internal/filer/store"
)

// write is a buffered Put (del false) or Delete.
type write struct {
	val []byte
	del bool
}

// tx is a transaction on one connection: reads WATCH, writes wait for exec.
type tx struct {
	ctx        context.Context
	rtx        *goredis.Tx
	keys       keyspace
	writes     map[string]write
	read       bool // something was watched and read: exec must validate
	idxWatched bool
	done       bool
}

func (t *tx) check() error {
	if t.done {
		return store.ErrTxDone
	}
	return t.ctx.Err()
}

func (t *tx) Get(key []byte) ([]byte, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	if err := store.CheckKey(key); err != nil {
		return nil, err
	}
	if w, ok := t.writes[string(key)]; ok {
		if w.del {
			return nil, store.ErrNotFound
		}
		return slices.Clone(w.val), nil
	}
	vk := t.keys.value(string(key))
	var get *goredis.StringCmd
	// WATCH before GET, in one round trip: a change after the GET fails
	// the EXEC.
	_, err := t.rtx.Pipelined(t.ctx, func(p goredis.Pipeliner) error {
		p.Do(t.ctx, "watch", vk)
		get = p.Get(t.ctx, vk)
		return nil
	})
	t.read = true
	if errors.Is(err, goredis.Nil) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("redis: get: %w", err)
	}
	return get.Bytes()
}

func (t *tx) Scan(start, end []byte, limit int, fn store.ScanFunc) error {
	if err := t.check(); err != nil {
		return err
	}
	if store.EmptyRange(start, end) {
		return nil
	}
	if !t.idxWatched {
		// Membership of the whole index is what a scan reads.
		if err := t.rtx.Watch(t.ctx, t.keys.idx).Err(); err != nil {
			return fmt.Errorf("redis: watch: %w", err)
		}
		t.idxWatched = true
	}
	t.read = true
	var local []string
	for k := range t.writes {
		if string(start) <= k && (end == nil || k < string(end)) {
			local = append(local, k)
		}
	}
	slices.Sort(local)
	fetch := limit
	if limit > 0 {
		fetch = limit + len(local) // buffered deletes may hide fetched keys
	}
	return merge(t.ctx, newRemote(t.ctx, t.rtx, t.keys, start, end, fetch, true), local, t.writes, limit, fn)
}

func (t *tx) Put(key, val []byte) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := store.CheckKey(key); err != nil {
		return err
	}
	if err := store.CheckValue(val); err != nil {
		return err
	}
	t.writes[string(key)] = write{val: append([]byte{}, val...)}
	return nil
}

func (t *tx) Delete(key []byte) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := store.CheckKey(key); err != nil {
		return err
	}
	t.writes[string(key)] = write{del: true}
	return nil
}

// exec sends writes in MULTI/EXEC; with no writes it only validates the
// watches. It returns goredis.TxFailedErr if a watched key changed.
func (t *tx) exec(writes map[string]write) error {
	_, err := t.rtx.TxPipelined(t.ctx, func(p goredis.Pipeliner) error {
		if len(writes) == 0 {
			p.Ping(t.ctx)
		}
		for k, w := range writes {
			if w.del {
				p.Del(t.ctx, t.keys.value(k))
				p.ZRem(t.ctx, t.keys.idx, k)
			} else {
				p.Set(t.ctx, t.keys.value(k), w.val, 0)
				p.ZAdd(t.ctx, t.keys.idx, goredis.Z{Member: k})
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, goredis.TxFailedErr) {
		return fmt.Errorf("redis: commit: %w", err)
	}
	return err
}
