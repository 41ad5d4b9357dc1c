package redis

import (
	"context"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kelpfs/kelp/internal/filer/store"
)

// conn is what a scan needs from a client or a transaction's connection.
type conn interface {
	ZRangeByLex(ctx context.Context, key string, opt *goredis.ZRangeBy) *goredis.StringSliceCmd
	Pipelined(ctx context.Context, fn func(goredis.Pipeliner) error) ([]goredis.Cmder, error)
}

// remote iterates over the stored pairs of a range, a page at a time.
type remote struct {
	ctx       context.Context
	c         conn
	ks        keyspace
	min, max  string
	count     int
	watch     bool // WATCH value keys before reading them (in a transaction)
	keys      []string
	vals      [][]byte
	exhausted bool
}

func newRemote(ctx context.Context, c conn, ks keyspace, start, end []byte, limit int, watch bool) *remote {
	r := &remote{ctx: ctx, c: c, ks: ks, min: "-", max: "+", count: pageSize, watch: watch}
	if len(start) > 0 {
		r.min = "[" + string(start)
	}
	if end != nil {
		r.max = "(" + string(end)
	}
	if limit > 0 {
		r.count = min(pageSize, limit)
	}
	return r
}

// peek returns the next pair without consuming it; ok false at the end.
func (r *remote) peek() (k string, v []byte, ok bool, err error) {
	for len(r.keys) == 0 {
		if r.exhausted {
			return "", nil, false, nil
		}
		if err := r.fetch(); err != nil {
			return "", nil, false, err
		}
	}
	return r.keys[0], r.vals[0], true, nil
}

func (r *remote) next() { r.keys, r.vals = r.keys[1:], r.vals[1:] }

func (r *remote) fetch() error {
	keys, err := r.c.ZRangeByLex(r.ctx, r.ks.idx, &goredis.ZRangeBy{Min: r.min, Max: r.max, Count: int64(r.count)}).Result()
	if err != nil {
		return fmt.Errorf("redis: scan: %w", err)
	}
	if len(keys) < r.count {
		r.exhausted = true
	}
	if len(keys) == 0 {
		return nil
	}
	r.min = "(" + keys[len(keys)-1]
	vkeys := make([]string, len(keys))
	for i, k := range keys {
		vkeys[i] = r.ks.value(k)
	}
	var mget *goredis.SliceCmd
	_, err = r.c.Pipelined(r.ctx, func(p goredis.Pipeliner) error {
		if r.watch {
			args := make([]any, 0, 1+len(vkeys))
			args = append(args, "watch")
			for _, vk := range vkeys {
				args = append(args, vk)
			}
			p.Do(r.ctx, args...)
		}
		mget = p.MGet(r.ctx, vkeys...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("redis: scan: %w", err)
	}
	r.keys, r.vals = r.keys[:0], r.vals[:0]
	for i, v := range mget.Val() {
		s, ok := v.(string)
		if !ok {
			// Deleted since the ZRANGEBYLEX. In a transaction the watch on
			// idx will fail the EXEC; outside one the key is simply gone.
			continue
		}
		r.keys, r.vals = append(r.keys, keys[i]), append(r.vals, []byte(s))
	}
	return nil
}

// merge yields, in order and up to limit, the pairs of r overlaid with a
// transaction's buffered writes to the sorted keys local.
func merge(ctx context.Context, r *remote, local []string, writes map[string]write, limit int, fn store.ScanFunc) error {
	n := 0
	for limit <= 0 || n < limit {
		rk, rv, rok, err := r.peek()
		if err != nil {
			return err
		}
		var k string
		var v []byte
		switch {
		case len(local) > 0 && (!rok || local[0] <= rk):
			if rok && local[0] == rk {
				r.next() // the transaction's write hides the stored pair
			}
			k, local = local[0], local[1:]
			w := writes[k]
			if w.del {
				continue
			}
			v = w.val
		case rok:
			k, v = rk, rv
			r.next()
		default:
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		n++
		if err := fn([]byte(k), v); err != nil {
			if errors.Is(err, store.ErrStopScan) {
				return nil
			}
			return err
		}
	}
	return nil
}
