// Package postgres is a store.Store in a PostgreSQL table, for filers that
// share one namespace. It uses jackc/pgx through a connection pool.
//
// Layout (format 1): one table, by default kelp_filer_kv,
//
//	CREATE TABLE kelp_filer_kv (k bytea PRIMARY KEY, v bytea NOT NULL)
//
// commented 'kelp filer store format 1'. bytea compares bytewise, which is
// the order store.Store promises, whatever the database's collation. Open
// creates the table if missing (under an advisory lock, so that filers
// starting together do not race) and refuses a table whose comment names
// another format.
//
// Transactions: Update runs at SERIALIZABLE isolation and retries fn when
// PostgreSQL reports a serialisation failure or deadlock (SQLSTATE 40001,
// 40P01), with jittered backoff, up to Options.MaxRetries times; a
// conflict that surfaces while fn reads is remembered even if fn drops the
// error, and causes a retry too. View and Store.Scan run in REPEATABLE READ
// READ ONLY transactions, so they see one snapshot; scans fetch pages of
// rows by key so that the callback may use the store while scanning.
//
// Durability is PostgreSQL's: with fsync and synchronous_commit on (the
// defaults) COMMIT returns, and the commit becomes visible to others, only
// after its WAL record is flushed, so an Update that answers nil — one that
// wrote nothing but read another's commit included — promises only what
// is on disk. With synchronous_commit off a crash may lose the last commits.
//
// Imported by internal/cli (wiring) and tests.
package postgres
