package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kelpfs/kelp/internal/filer/store"
	"github.com/kelpfs/kelp/internal/filer/store/storetest"
	"github.com/kelpfs/kelp/internal/testutil"
)

// defaultURL is where scripts/test-deps.sh starts Redis.
const defaultURL = "redis://127.0.0.1:63799/0"

// testURL returns a reachable server, or skips (only when
// KELP_TEST_ALLOW_SKIP=1) or fails: CI must not pass without the backend.
func testURL(tb testing.TB) string {
	url := os.Getenv("KELP_TEST_REDIS_URL")
	if url == "" {
		url = defaultURL
	}
	ro, err := goredis.ParseURL(url)
	if err == nil {
		ro.MaxRetries = -1 // a probe: one dial is enough
		c := goredis.NewClient(ro)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = c.Ping(ctx).Err()
		cancel()
		c.Close()
	}
	if err == nil {
		return url
	}
	testutil.SkipOrFail(tb, "Redis at %s unreachable (set KELP_TEST_REDIS_URL to use another): %v", url, err)
	return ""
}

// freshPrefix returns a new namespace prefix whose keys are deleted when tb
// ends.
func freshPrefix(tb testing.TB, url string) string {
	var id [6]byte
	rand.Read(id[:])
	prefix := "{kelptest-" + hex.EncodeToString(id[:]) + "}:"
	tb.Cleanup(func() {
		ro, _ := goredis.ParseURL(url)
		c := goredis.NewClient(ro)
		defer c.Close()
		ctx := context.Background()
		it := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for it.Next(ctx) {
			c.Del(ctx, it.Val())
		}
		if err := it.Err(); err != nil {
			tb.Errorf("clean up %s: %v", prefix, err)
		}
	})
	return prefix
}

func backend(url string, opts Options) storetest.Backend {
	return storetest.Backend{
		Shared: true,
		Fresh: func(tb testing.TB) storetest.Opener {
			prefix := freshPrefix(tb, url)
			return func(tb testing.TB) store.Store {
				o := opts
				o.Prefix = prefix
				s, err := Open(context.Background(), url, &o)
				if err != nil {
					tb.Fatal(err)
				}
				tb.Cleanup(func() { s.Close() })
				return s
			}
		},
	}
}

func TestConformance(t *testing.T) { storetest.Run(t, backend(testURL(t), Options{})) }

func TestGiveUp(t *testing.T) {
	open := backend(testURL(t), Options{MaxRetries: 2}).Fresh(t)
	storetest.GiveUp(t, open(t), open(t))
}

func TestOpenRefusesOtherFormat(t *testing.T) {
	url := testURL(t)
	prefix := freshPrefix(t, url)
	ro, _ := goredis.ParseURL(url)
	c := goredis.NewClient(ro)
	defer c.Close()
	if err := c.Set(context.Background(), prefix+"format", "99", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(context.Background(), url, &Options{Prefix: prefix}); err == nil {
		s.Close()
		t.Fatal("Open accepted a namespace of format 99")
	}
}

// TestLayout pins the documented key layout, which other tools may read.
func TestLayout(t *testing.T) {
	url := testURL(t)
	prefix := freshPrefix(t, url)
	s, err := Open(context.Background(), url, &Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.Put([]byte("a\x00b"), []byte("val")) }); err != nil {
		t.Fatal(err)
	}
	ro, _ := goredis.ParseURL(url)
	c := goredis.NewClient(ro)
	defer c.Close()
	if v, err := c.Get(ctx, prefix+"v:a\x00b").Result(); err != nil || v != "val" {
		t.Fatalf("value key: %q, %v", v, err)
	}
	if m, err := c.ZRangeWithScores(ctx, prefix+"idx", 0, -1).Result(); err != nil || len(m) != 1 || m[0].Member != "a\x00b" || m[0].Score != 0 {
		t.Fatalf("index: %v, %v", m, err)
	}
	if v, _ := c.Get(ctx, prefix+"format").Result(); v != "1" {
		t.Fatalf("format key = %q, want 1", v)
	}
}

func BenchmarkStore(b *testing.B) { storetest.Benchmark(b, backend(testURL(b), Options{})) }
