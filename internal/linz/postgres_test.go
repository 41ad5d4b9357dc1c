package linz

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kelpfs/kelp/internal/filer/store"
	"github.com/kelpfs/kelp/internal/filer/store/postgres"
	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/testutil"
)

// twoKV sends each operation to one of two filers in turn.
type twoKV struct {
	kv [2]kv
	n  atomicCounter
}

func (t *twoKV) pick() kv                     { return t.kv[t.n.next()%2] }
func (t *twoKV) Get(k string) (string, error) { return t.pick().Get(k) }
func (t *twoKV) Put(k, v string) error        { return t.pick().Put(k, v) }
func (t *twoKV) Delete(k string) error        { return t.pick().Delete(k) }

// TestTwoFilersPostgresLinearizable: two filers sharing one PostgreSQL
// table, each behind a bridge, with clients' operations spread over both:
// one register per path across filers, under faults.
func TestTwoFilersPostgresLinearizable(t *testing.T) {
	dsn := os.Getenv("KELP_TEST_POSTGRES_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:54329/kelptest?sslmode=disable"
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		testutil.SkipOrFail(t, "PostgreSQL at %s unreachable: %v", dsn, err)
	}
	var rb [6]byte
	rand.Read(rb[:])
	table := "kelp_linz_test_" + hex.EncodeToString(rb[:])
	t.Cleanup(func() { pool.Exec(ctx, "DROP TABLE IF EXISTS "+table); pool.Close() })
	open := func() store.Store {
		st, err := postgres.Open(ctx, dsn, &postgres.Options{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	r := startRigWith(t, func(c *filerserver.Config) { c.MetaStore = open() })
	cfg := r.fcfg
	cfg.MetaStore, cfg.Dir, cfg.Logger = open(), t.TempDir(), slog.New(slog.DiscardHandler)
	fs2, err := filerserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- fs2.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	b2 := newBridge(t, fs2.Addr())
	r.extra = append(r.extra, b2)
	s := &twoKV{kv: [2]kv{
		&filerKV{base: "http://" + r.filer.Addr(), hc: &http.Client{}},
		&filerKV{base: "http://" + b2.Addr(), hc: &http.Client{}},
	}}
	r.run(t, "two-filers-postgres", s, "", 300)
}
