package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kelpfs/kelp/internal/filer/store"
	"github.com/kelpfs/kelp/internal/filer/store/internal/gate"
	"github.com/kelpfs/kelp/internal/filer/store/internal/txretry"
	"github.com/kelpfs/kelp/internal/security"
)

// DefaultTable is the table used when Options.Table is empty.
const DefaultTable = "kelp_filer_kv"

const formatComment = "kelp filer store format 1"

// pageSize is how many rows a scan fetches per query.
const pageSize = 256

// Options tune the store. The zero value (or nil) is the default.
type Options struct {
	// Table is the table name, a plain lower-case SQL identifier
	// (optionally schema-qualified); default DefaultTable. Namespaces in
	// one database differ by table.
	Table string
	// MaxRetries bounds the retries of a conflicting Update; default
	// txretry.DefaultMax.
	MaxRetries int
}

// Store is a store.Store on a PostgreSQL table.
type Store struct {
	pool       *pgxpool.Pool
	maxRetries int
	gate       gate.Gate
	q          queries
}

var _ store.Store = (*Store)(nil)

var identRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}(\.[a-z_][a-z0-9_]{0,62})?$`)

// Open connects to the database named by dsn (a libpq URL or key=value
// string, including pool_max_conns and the like) and creates the table if
// it is missing.
func Open(ctx context.Context, dsn string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Table == "" {
		o.Table = DefaultTable
	}
	if !identRE.MatchString(o.Table) {
		return nil, fmt.Errorf("postgres: table name %q is not a plain identifier: %w", o.Table, store.ErrInvalid)
	}
	if o.MaxRetries <= 0 {
		o.MaxRetries = txretry.DefaultMax
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse dsn: %w", err)
	}
	applyProcessTLS(cfg, dsn)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	s := &Store{pool: pool, maxRetries: o.MaxRetries, q: newQueries(o.Table)}
	if err := s.createTable(ctx, o.Table); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// applyProcessTLS gives the connections the DSN sends over TLS (sslmode
// require, verify-ca, verify-full, and the TLS attempt of prefer/allow)
// this process's TLS settings (security.Process: --tls.ca, --tls.cert,
// --tls.key): tls.ca verifies the server unless the DSN names its own
// sslrootcert (or PGSSLROOTCERT does), and the process's certificate is the
// client certificate unless the DSN names sslcert. sslmode=disable, or a
// process without TLS, changes nothing.
func applyProcessTLS(cfg *pgxpool.Config, dsn string) {
	t := security.Process()
	if t == nil {
		return
	}
	roots := !dsnHas(dsn, "sslrootcert") && os.Getenv("PGSSLROOTCERT") == ""
	t.ApplyClient(cfg.ConnConfig.TLSConfig, roots)
	for _, fb := range cfg.ConnConfig.Fallbacks {
		if fb.TLSConfig != cfg.ConnConfig.TLSConfig {
			t.ApplyClient(fb.TLSConfig, roots)
		}
	}
}

// dsnHas reports whether a libpq DSN (a URL or key=value pairs) sets key.
func dsnHas(dsn, key string) bool {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		return err == nil && u.Query().Has(key)
	}
	for _, f := range strings.Fields(dsn) {
		if k, _, ok := strings.Cut(f, "="); ok && strings.TrimSpace(k) == key {
			return true
		}
	}
	return false
}

func (s *Store) createTable(ctx context.Context, table string) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Serialise concurrent creators: CREATE TABLE IF NOT EXISTS alone
		// can fail with a unique violation when two run at once.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "kelp store "+table); err != nil {
			return fmt.Errorf("postgres: lock for create: %w", err)
		}
		var comment *string
		err := tx.QueryRow(ctx, `SELECT obj_description(to_regclass($1), 'pg_class')`, table).Scan(&comment)
		if err != nil {
			return fmt.Errorf("postgres: inspect table %s: %w", table, err)
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists); err != nil {
			return fmt.Errorf("postgres: inspect table %s: %w", table, err)
		}
		if exists {
			if comment == nil || *comment != formatComment {
				got := "no comment"
				if comment != nil {
					got = *comment
				}
				return fmt.Errorf("postgres: table %s exists but is not a %q table (%s)", table, formatComment, got)
			}
			return nil
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE `+table+` (k bytea PRIMARY KEY, v bytea NOT NULL)`); err != nil {
			return fmt.Errorf("postgres: create table %s: %w", table, err)
		}
		if _, err := tx.Exec(ctx, `COMMENT ON TABLE `+table+` IS '`+formatComment+`'`); err != nil {
			return fmt.Errorf("postgres: comment table %s: %w", table, err)
		}
		return nil
	})
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
	return s.q.get(ctx, s.pool, key)
}

// Scan implements store.Store. It reads one snapshot: a scan that fits in
// one page is one SELECT, a longer one pages inside a read-only transaction.
func (s *Store) Scan(ctx context.Context, start, end []byte, limit int, fn store.ScanFunc) error {
	if limit <= 0 || limit > pageSize {
		return s.View(ctx, func(tx store.ReadTx) error { return tx.Scan(start, end, limit, fn) })
	}
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
	keys, vals, err := s.q.page(ctx, s.pool, start, nil, end, limit)
	if err != nil {
		return err
	}
	_, err = yield(ctx, keys, vals, fn)
	return err
}

// View implements store.Store; fn runs once.
func (s *Store) View(ctx context.Context, fn func(tx store.ReadTx) error) error {
	if err := s.gate.Enter(); err != nil {
		return err
	}
	defer s.gate.Leave()
	if err := ctx.Err(); err != nil {
		return err
	}
	ptx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("postgres: begin: %w", ctxErr(ctx, err))
	}
	t := &tx{ctx: ctx, ptx: ptx, q: &s.q}
	err = fn(t)
	t.done = true
	rollback(ctx, ptx)
	return err
}

// Update implements store.Store.
func (s *Store) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	if err := s.gate.Enter(); err != nil {
		return err
	}
	defer s.gate.Leave()
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := s.tryUpdate(ctx, fn)
		if !isConflict(err) {
			return err
		}
		if attempt == s.maxRetries {
			return fmt.Errorf("postgres: %w after %d attempts: %w", store.ErrConflict, attempt+1, err)
		}
		if err := txretry.Wait(ctx, attempt); err != nil {
			return err
		}
	}
}

func (s *Store) tryUpdate(ctx context.Context, fn func(tx store.Tx) error) error {
	ptx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	if err != nil {
		return fmt.Errorf("postgres: begin: %w", ctxErr(ctx, err))
	}
	t := &tx{ctx: ctx, ptx: ptx, q: &s.q}
	err = fn(t)
	t.done = true
	if t.conflict != nil {
		// fn saw a serialisation failure, whatever it made of it.
		rollback(ctx, ptx)
		return t.conflict
	}
	if err != nil {
		rollback(ctx, ptx)
		return err
	}
	if err := ctx.Err(); err != nil {
		rollback(ctx, ptx)
		return err
	}
	if err := ptx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: commit: %w", ctxErr(ctx, err))
	}
	return nil
}

// Close implements store.Store.
func (s *Store) Close() error {
	if s.gate.Close() {
		s.pool.Close()
	}
	return nil
}

// rollback ends a transaction even when ctx is already cancelled.
func rollback(ctx context.Context, ptx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = ptx.Rollback(ctx) // failure closes the connection, which aborts the transaction
}

// isConflict reports a failure that retrying the transaction may cure.
func isConflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// ctxErr prefers the context's error, which pgx may report as a closed
// connection or an unwrapped "context canceled".
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return err
}
