package redis

import (
	"context"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kelpfs/kelp/internal/filer/store"
	"github.com/kelpfs/kelp/internal/filer/store/internal/gate"
	"github.com/kelpfs/kelp/internal/filer/store/internal/txretry"
	"github.com/kelpfs/kelp/internal/security"
)

// DefaultPrefix is the key prefix used when Options.Prefix is empty.
const DefaultPrefix = "{kelp}:"

const formatVersion = "1"

// pageSize is how many keys a scan fetches per round trip.
const pageSize = 256

// Options tune the store. The zero value (or nil) is the default.
type Options struct {
	// Prefix starts every Redis key of this namespace; default
	// DefaultPrefix. Namespaces in one Redis database differ by prefix.
	Prefix string
	// MaxRetries bounds the retries of a conflicting transaction; default
	// txretry.DefaultMax.
	MaxRetries int
}

// Store is a store.Store in a Redis database.
type Store struct {
	client     *goredis.Client
	keys       keyspace
	maxRetries int
	gate       gate.Gate
}

var _ store.Store = (*Store)(nil)

// keyspace names the Redis keys of one namespace.
type keyspace struct{ format, idx, valuePrefix string }

func (ks keyspace) value(key string) string { return ks.valuePrefix + key }

// Open connects to the Redis server named by url (redis://[user:pass@]host:
// port/db, or rediss:// for TLS) and marks or checks the namespace's format.
func Open(ctx context.Context, url string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.MaxRetries <= 0 {
		o.MaxRetries = txretry.DefaultMax
	}
	ro, err := goredis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis: parse url: %w", err)
	}
	// rediss:// (TLS): this process's TLS settings apply, tls.ca verifies
	// the server and the process's certificate is the client certificate.
	security.Process().ApplyClient(ro.TLSConfig, true)
	client := goredis.NewClient(ro)
	s := &Store{
		client:     client,
		keys:       keyspace{format: o.Prefix + "format", idx: o.Prefix + "idx", valuePrefix: o.Prefix + "v:"},
		maxRetries: o.MaxRetries,
	}
	if err := client.SetNX(ctx, s.keys.format, formatVersion, 0).Err(); err != nil {
		client.Close()
		return nil, fmt.Errorf("redis: connect %s: %w", ro.Addr, err)
	}
	got, err := client.Get(ctx, s.keys.format).Result()
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("redis: read format: %w", err)
	}
	if got != formatVersion {
		client.Close()
		return nil, fmt.Errorf("redis: namespace %q has format %q, this build reads %q", o.Prefix, got, formatVersion)
	}
	return s, nil
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key []byte) ([]byte, error) {
	if err := s.gate.Enter(); err != nil {
		return nil, err
	}
	defer s.gate.Leave()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.CheckKey(key); err != nil {
		return nil, err
	}
	v, err := s.client.Get(ctx, s.keys.value(string(key))).Bytes()
	if errors.Is(err, goredis.Nil) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("redis: get: %w", err)
	}
	return v, nil
}

// Scan implements store.Store, without a snapshot: see the package comment.
func (s *Store) Scan(ctx context.Context, start, end []byte, limit int, fn store.ScanFunc) error {
	if err := s.gate.Enter(); err != nil {
		return err
	}
	defer s.gate.Leave()
	if err := ctx.Err(); err != nil {
		return err
	}
	if store.EmptyRange(start, end) {
		return nil
	}
	return merge(ctx, newRemote(ctx, s.client, s.keys, start, end, limit, false), nil, nil, limit, fn)
}

// View implements store.Store; fn may run more than once.
func (s *Store) View(ctx context.Context, fn func(tx store.ReadTx) error) error {
	return s.run(ctx, func(t *tx) error { return fn(t) })
}

// Update implements store.Store; fn may run more than once.
func (s *Store) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	return s.run(ctx, func(t *tx) error { return fn(t) })
}

// run runs fn in optimistic transactions until one commits.
func (s *Store) run(ctx context.Context, fn func(t *tx) error) error {
	if err := s.gate.Enter(); err != nil {
		return err
	}
	defer s.gate.Leave()
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Watching the format key, which never changes, arms go-redis to
		// UNWATCH before the connection goes back to the pool.
		err := s.client.Watch(ctx, func(rtx *goredis.Tx) error {
			return s.attempt(ctx, rtx, fn)
		}, s.keys.format)
		if !errors.Is(err, goredis.TxFailedErr) {
			return err
		}
		if attempt == s.maxRetries {
			return fmt.Errorf("redis: %w after %d attempts", store.ErrConflict, attempt+1)
		}
		if err := txretry.Wait(ctx, attempt); err != nil {
			return err
		}
	}
}

// attempt runs fn once; goredis.TxFailedErr asks for a retry.
func (s *Store) attempt(ctx context.Context, rtx *goredis.Tx, fn func(t *tx) error) error {
	t := &tx{ctx: ctx, rtx: rtx, keys: s.keys, writes: map[string]write{}}
	ferr := fn(t)
	t.done = true
	if err := ctx.Err(); err != nil {
		return err
	}
	if ferr != nil {
		if !t.read {
			return ferr
		}
		// Was fn's failure based on a consistent read? EXEC with nothing
		// to write answers that.
		if err := t.exec(nil); err != nil {
			return err
		}
		return ferr
	}
	if !t.read && len(t.writes) == 0 {
		return nil
	}
	return t.exec(t.writes)
}

// Close implements store.Store.
func (s *Store) Close() error {
	if !s.gate.Close() {
		return nil
	}
	if err := s.client.Close(); err != nil {
		return fmt.Errorf("redis: close: %w", err)
	}
	return nil
}
