package filer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/kelpfs/kelp/internal/chunk/chunktest"
	"github.com/kelpfs/kelp/internal/filer/store"
	"github.com/kelpfs/kelp/internal/filer/store/postgres"
	"github.com/kelpfs/kelp/internal/filer/store/redis"
	"github.com/kelpfs/kelp/internal/testutil"
)

// The defaults match scripts/test-deps.sh and the store backends' tests.
const (
	defaultPostgresDSN = "postgres://postgres@127.0.0.1:54329/kelptest?sslmode=disable"
	defaultRedisURL    = "redis://127.0.0.1:63799/0"
)

func randomName() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// unreachable skips (KELP_TEST_ALLOW_SKIP=1) or fails, as the backends' own
// tests do: CI must not pass without the servers.
func unreachable(tb testing.TB, what string, err error) {
	tb.Helper()
	testutil.SkipOrFail(tb, "%s unreachable: %v", what, err)
}

// postgresOpener returns a function opening stores on one fresh table,
// dropped when tb ends.
func postgresOpener(tb testing.TB) func() store.Store {
	dsn := os.Getenv("KELP_TEST_POSTGRES_DSN")
	if dsn == "" {
		dsn = defaultPostgresDSN
	}
	table := "kelp_filer_test_" + randomName()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		unreachable(tb, "PostgreSQL at "+dsn, err)
	}
	tb.Cleanup(func() {
		pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
		pool.Close()
	})
	return func() store.Store {
		s, err := postgres.Open(context.Background(), dsn, &postgres.Options{Table: table})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close() })
		return s
	}
}

func redisOpener(tb testing.TB) func() store.Store {
	url := os.Getenv("KELP_TEST_REDIS_URL")
	if url == "" {
		url = defaultRedisURL
	}
	prefix := "{kelpfilertest-" + randomName() + "}:"
	ro, err := goredis.ParseURL(url)
	var c *goredis.Client
	if err == nil {
		c = goredis.NewClient(ro)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = c.Ping(ctx).Err()
		cancel()
	}
	if err != nil {
		unreachable(tb, "Redis at "+url, err)
	}
	tb.Cleanup(func() {
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		c.Close()
	})
	return func() store.Store {
		s, err := redis.Open(context.Background(), url, &redis.Options{Prefix: prefix})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close() })
		return s
	}
}

// TestTwoFilersShareOneStore: a file written through one filer is read
// through another on the same PostgreSQL (and Redis) namespace, and each
// filer's subscriber sees the other's events.
func TestTwoFilersShareOneStore(t *testing.T) {
	for name, opener := range map[string]func(testing.TB) func() store.Store{"postgres": postgresOpener, "redis": redisOpener} {
		t.Run(name, func(t *testing.T) {
			open := opener(t)
			blobs := chunktest.New() // one cluster behind both filers
			mk := func() *Filer {
				f, err := New(Config{Store: open(), Blobs: blobs, ChunkSize: 64, PollInterval: 10 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { f.Close() })
				return f
			}
			a, b := mk(), mk()
			ctx := context.Background()
			s := &sub{}
			subscribe(b, 0, s)
			defer s.stop()
			data := strings.Repeat("shared namespace ", 20)
			if _, err := a.WriteFile(ctx, "/x/y.txt", strings.NewReader(data), WriteOptions{Mime: "text/plain"}); err != nil {
				t.Fatal(err)
			}
			ent, err := b.FindEntry(ctx, "/x/y.txt")
			if err != nil {
				t.Fatal(err)
			}
			r, err := b.Open(ctx, ent)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(data)+1)
			n, _ := r.Read(got)
			for n < len(data) {
				m, err := r.Read(got[n:])
				n += m
				if err != nil {
					break
				}
			}
			if string(got[:n]) != data || ent.Mime != "text/plain" {
				t.Fatalf("read through b: %q", got[:n])
			}
			if err := b.Rename(ctx, "/x", "/z"); err != nil {
				t.Fatal(err)
			}
			if _, err := a.FindEntry(ctx, "/z/y.txt"); err != nil {
				t.Fatalf("a does not see b's rename: %v", err)
			}
			s.waitFor(t, 3) // create /x, create /x/y.txt (from a), rename (from b)
			s.mu.Lock()
			defer s.mu.Unlock()
			var types []string
			for _, ev := range s.events {
				types = append(types, fmt.Sprintf("%d%s", ev.Seq, ev.Type))
			}
			if fmt.Sprint(types) != "[1create 2create 3rename]" {
				t.Fatalf("b's subscriber saw %v", types)
			}
		})
	}
}

// BenchmarkEntries measures entries created and looked up per second on
// each store, through the Filer (one transaction and one event per create).
func BenchmarkEntries(b *testing.B) {
	openers := map[string]func(testing.TB) func() store.Store{
		"pebble": func(tb testing.TB) func() store.Store {
			dir := tb.TempDir()
			return func() store.Store {
				s := openPebble(tb, dir)
				tb.Cleanup(func() { s.Close() })
				return s
			}
		},
		"pebble-fsync": func(tb testing.TB) func() store.Store {
			dir := tb.TempDir()
			return func() store.Store {
				s, err := openPebbleSync(dir)
				if err != nil {
					tb.Fatal(err)
				}
				tb.Cleanup(func() { s.Close() })
				return s
			}
		},
		"postgres": postgresOpener,
		"redis":    redisOpener,
	}
	for _, name := range []string{"pebble", "pebble-fsync", "postgres", "redis"} {
		b.Run(name, func(b *testing.B) {
			f, err := New(Config{Store: openers[name](b)(), Blobs: chunktest.New()})
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			ctx := context.Background()
			b.Run("create", func(b *testing.B) {
				var i int64
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						n := atomicAdd(&i)
						e := &Entry{Path: fmt.Sprintf("/bench/d%d/f%d", n%64, n), Mode: 0o644}
						if err := f.CreateEntry(ctx, e, CreateOptions{}); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
			})
			b.Run("lookup", func(b *testing.B) {
				for i := 0; i < 1000; i++ {
					if err := f.CreateEntry(ctx, &Entry{Path: fmt.Sprintf("/look/f%d", i), Mode: 0o644}, CreateOptions{}); err != nil {
						b.Fatal(err)
					}
				}
				b.ResetTimer()
				var i int64
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						n := atomicAdd(&i)
						if _, err := f.FindEntry(ctx, fmt.Sprintf("/look/f%d", n%1000)); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
			})
		})
	}
}
