package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kelpfs/kelp/internal/filer/store"
)

// querier is what both the pool and a transaction provide.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// queries holds the SQL for one table, built once at Open.
type queries struct {
	table, getSQL, putSQL, delSQL string
}

func newQueries(table string) queries {
	return queries{
		table:  table,
		getSQL: `SELECT v FROM ` + table + ` WHERE k = $1`,
		putSQL: `INSERT INTO ` + table + ` (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v`,
		delSQL: `DELETE FROM ` + table + ` WHERE k = $1`,
	}
}

func (q *queries) get(ctx context.Context, db querier, key []byte) ([]byte, error) {
	if err := store.CheckKey(key); err != nil {
		return nil, err
	}
	var v []byte
	err := db.QueryRow(ctx, q.getSQL, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: get: %w", ctxErr(ctx, err))
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

// page fetches up to n pairs with key > after (or >= start when after is
// nil) and key < end (no bound when end is nil).
func (q *queries) page(ctx context.Context, db querier, start, after, end []byte, n int) (keys, vals [][]byte, err error) {
	var sql strings.Builder
	sql.WriteString(`SELECT k, v FROM ` + q.table + ` WHERE true`)
	var args []any
	switch {
	case after != nil:
		args = append(args, after)
		fmt.Fprintf(&sql, ` AND k > $%d`, len(args))
	case len(start) > 0:
		args = append(args, start)
		fmt.Fprintf(&sql, ` AND k >= $%d`, len(args))
	}
	if end != nil {
		args = append(args, end)
		fmt.Fprintf(&sql, ` AND k < $%d`, len(args))
	}
	args = append(args, n)
	fmt.Fprintf(&sql, ` ORDER BY k LIMIT $%d`, len(args))
	rows, err := db.Query(ctx, sql.String(), args...)
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: scan: %w", ctxErr(ctx, err))
	}
	defer rows.Close()
	for rows.Next() {
		var k, v []byte
		if err := rows.Scan(&k, &v); err != nil {
			return nil, nil, fmt.Errorf("postgres: scan: %w", err)
		}
		keys, vals = append(keys, k), append(vals, v)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("postgres: scan: %w", ctxErr(ctx, err))
	}
	return keys, vals, nil
}

// tx is a View or Update transaction.
type tx struct {
	ctx      context.Context
	ptx      pgx.Tx
	q        *queries
	done     bool
	conflict error // first serialisation failure seen
}

func (t *tx) check() error {
	if t.done {
		return store.ErrTxDone
	}
	return t.ctx.Err()
}

// note remembers a serialisation failure so that Update retries even if fn
// swallows the error.
func (t *tx) note(err error) error {
	if t.conflict == nil && isConflict(err) {
		t.conflict = err
	}
	return err
}

func (t *tx) Get(key []byte) ([]byte, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	v, err := t.q.get(t.ctx, t.ptx, key)
	return v, t.note(err)
}

func (t *tx) Scan(start, end []byte, limit int, fn store.ScanFunc) error {
	if err := t.check(); err != nil {
		return err
	}
	if store.EmptyRange(start, end) {
		return nil
	}
	var after []byte
	for n := 0; limit <= 0 || n < limit; {
		want := pageSize
		if limit > 0 {
			want = min(want, limit-n)
		}
		keys, vals, err := t.q.page(t.ctx, t.ptx, start, after, end, want)
		if err != nil {
			return t.note(err)
		}
		if more, err := yield(t.ctx, keys, vals, fn); !more {
			return err
		}
		n += len(keys)
		if len(keys) < want {
			break
		}
		after = keys[len(keys)-1]
	}
	return nil
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
	if val == nil {
		val = []byte{} // nil would be NULL
	}
	if _, err := t.ptx.Exec(t.ctx, t.q.putSQL, key, val); err != nil {
		return t.note(fmt.Errorf("postgres: put: %w", ctxErr(t.ctx, err)))
	}
	return nil
}

func (t *tx) Delete(key []byte) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := store.CheckKey(key); err != nil {
		return err
	}
	if _, err := t.ptx.Exec(t.ctx, t.q.delSQL, key); err != nil {
		return t.note(fmt.Errorf("postgres: delete: %w", ctxErr(t.ctx, err)))
	}
	return nil
}

// yield calls fn for each pair of a page; more is false when the scan must
// end (fn stopped it or failed, or ctx ended), with the error Scan returns.
func yield(ctx context.Context, keys, vals [][]byte, fn store.ScanFunc) (more bool, err error) {
	for i := range keys {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if err := fn(keys[i], vals[i]); err != nil {
			if errors.Is(err, store.ErrStopScan) {
				return false, nil
			}
			return false, err
		}
	}
	return true, nil
}
