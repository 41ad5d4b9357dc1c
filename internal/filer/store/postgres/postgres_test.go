package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kelpfs/kelp/internal/filer/store"
	"github.com/kelpfs/kelp/internal/filer/store/storetest"
	"github.com/kelpfs/kelp/internal/testutil"
)

// defaultDSN is where scripts/test-deps.sh starts PostgreSQL.
const defaultDSN = "postgres://postgres@127.0.0.1:54329/kelptest?sslmode=disable"

// testDSN returns a reachable database, or skips (only when
// KELP_TEST_ALLOW_SKIP=1) or fails: CI must not pass without the backend.
func testDSN(tb testing.TB) string {
	dsn := os.Getenv("KELP_TEST_POSTGRES_DSN")
	if dsn == "" {
		dsn = defaultDSN
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	if err == nil {
		err = pool.Ping(ctx)
		pool.Close()
	}
	if err == nil {
		return dsn
	}
	testutil.SkipOrFail(tb, "PostgreSQL at %s unreachable (set KELP_TEST_POSTGRES_DSN to use another): %v", dsn, err)
	return ""
}

func backend(dsn string, opts Options) storetest.Backend {
	return storetest.Backend{
		Shared: true,
		Fresh: func(tb testing.TB) storetest.Opener {
			var id [6]byte
			rand.Read(id[:])
			table := "kelp_test_" + hex.EncodeToString(id[:])
			tb.Cleanup(func() {
				pool, err := pgxpool.New(context.Background(), dsn)
				if err == nil {
					_, err = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
					pool.Close()
				}
				if err != nil {
					tb.Errorf("drop %s: %v", table, err)
				}
			})
			return func(tb testing.TB) store.Store {
				o := opts
				o.Table = table
				s, err := Open(context.Background(), dsn, &o)
				if err != nil {
					tb.Fatal(err)
				}
				tb.Cleanup(func() { s.Close() })
				return s
			}
		},
	}
}

func TestConformance(t *testing.T) { storetest.Run(t, backend(testDSN(t), Options{})) }

func TestGiveUp(t *testing.T) {
	open := backend(testDSN(t), Options{MaxRetries: 2}).Fresh(t)
	storetest.GiveUp(t, open(t), open(t))
}

func TestOpenRefusesForeignTable(t *testing.T) {
	dsn := testDSN(t)
	ctx := context.Background()
	s := backend(dsn, Options{}).Fresh(t)(t).(*Store)
	if _, err := s.pool.Exec(ctx, "COMMENT ON TABLE "+s.q.table+" IS 'something else'"); err != nil {
		t.Fatal(err)
	}
	if s2, err := Open(ctx, dsn, &Options{Table: s.q.table}); err == nil {
		s2.Close()
		t.Fatal("Open accepted a table of another format")
	}
	if _, err := Open(ctx, dsn, &Options{Table: "bad-name; drop"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Open with a bad table name: %v, want ErrInvalid", err)
	}
}

func BenchmarkStore(b *testing.B) { storetest.Benchmark(b, backend(testDSN(b), Options{})) }
