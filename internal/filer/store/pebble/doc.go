// Package pebble is the filer's embedded metadata store: a store.Store over
// a Pebble database (github.com/cockroachdb/pebble) in one local directory.
// It is the default backend; one process at a time may open a directory
// (Pebble takes a file lock), so filers that share a namespace use the
// postgres or redis backend instead.
//
// On disk: the directory is a plain Pebble database, created at Pebble's
// newest stable format major version and ratcheted up by later releases.
// The filer's keys and values are stored unchanged, with no keys of Kelp's
// own, so the database can be inspected with Pebble's tools.
//
// Transactions: Pebble has atomic batches but no conflict detection, so
// Update serialises read-write transactions behind one mutex and runs fn on
// an indexed batch (reads see the batch's writes over the live database);
// since no other writer can commit meanwhile, fn's reads stay valid and fn
// never needs a retry. View reads from a Pebble snapshot, and Store.Scan
// from an iterator's implicit snapshot, so neither ever sees part of a
// batch. Commits are fsynced unless Options.NoSync.
//
// Durability: Update returns nil only once its batch and every batch
// visible when it began are in the synced WAL. Batches are applied (and
// visible) before their fsync, so that concurrent commits share one; an
// Update that writes nothing may therefore have read a commit still waiting
// for it (a retried create that finds its first attempt's entry). Such an
// Update waits for a synced empty WAL record, which is durable only once
// everything before it is — unless no applied batch is waiting, which is
// the common case and costs nothing. View, Get and Scan do not wait.
//
// Memory: the block cache and memtables are sized small by default (a few
// MiB) because the filer's hot metadata is small and the whole `kelp
// server` is meant to idle in well under 100 MB.
//
// Imported by internal/cli (wiring) and tests.
package pebble
