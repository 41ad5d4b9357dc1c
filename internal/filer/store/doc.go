// Package store defines the filer's metadata store: a small ordered key-value
// store with serialisable transactions, behind one interface (Store) so that
// the namespace can live in an embedded database (package pebble, the
// default) or in a server that several filers share (packages postgres and
// redis).
//
// It owns the contract every backend keeps — key order, transaction
// semantics, slice ownership, errors — and a few pure helpers built on it
// (PrefixEnd, NextSeq, SeqKey). It defines no on-disk format of its own: keys
// and values are opaque bytes chosen by the filer; each backend documents how
// it lays them out.
//
// Imported by the filer (internal/filer), by the backends and by the
// conformance suite (storetest). It imports only the standard library.
//
// # Contract
//
//   - Keys are 1..MaxKeySize bytes, any byte values (0x00 and 0xff included),
//     ordered bytewise as by bytes.Compare. Values are 0..MaxValueSize bytes;
//     an empty value is a present key, distinct from ErrNotFound.
//   - Update runs fn in a serialisable read-write transaction: its writes
//     become visible all at once or not at all, and two Updates, even from
//     different processes sharing one backend, behave as if run one after the
//     other, so a read-modify-write never loses an update. fn may be run
//     more than once (optimistic backends retry on conflict); it must have no
//     effects outside tx, or reset them at its start. If fn returns an error
//     nothing is written and Update returns that error unchanged.
//   - View runs fn in a read-only transaction that sees one consistent
//     state: never part of a transaction. fn may be run more than once.
//   - Store.Get and Store.Scan are single reads outside any transaction. Get
//     returns one committed value. Scan yields committed pairs in key order,
//     but a long Scan that races with Updates may see some of a
//     transaction's writes and not others (the server backends read in
//     pages); use View when several keys must agree.
//   - Slices returned by Get are owned by the caller. Slices passed to a Scan
//     callback are valid only during that call: copy them to keep them.
//     Slices passed to Put and Delete may be reused by the caller as soon as
//     the call returns.
//   - A Scan callback may call other methods of the same Store or Tx (the
//     server backends read in pages, never holding a connection across a
//     callback). Writes a Tx makes from inside its own Scan callback may or
//     may not be seen by the rest of that scan.
//   - A Store is safe for concurrent use by many goroutines; a Tx is not, and
//     must not be used after its fn returns (ErrTxDone).
//   - Every call that may block takes a context; a cancelled context makes
//     the call return an error that wraps ctx.Err(), and an Update whose
//     context is cancelled before it commits writes nothing.
//   - Durability: when Update returns nil, fn's writes and every commit
//     that was visible when it began are durable, as far as the backend is
//     set up to be (pebble without NoSync, PostgreSQL with
//     synchronous_commit on, Redis with appendfsync always) — also when fn
//     wrote nothing, since its caller may answer "already done" on the
//     strength of a read. View, Get and Scan may see a commit that is not
//     durable yet (pebble makes commits visible before their fsync
//     returns): a caller that acts irreversibly on what it read (deleting
//     blobs, handing out events) runs an empty Update first.
//   - Deferred durability: an Update whose context carries
//     WithDeferredDurability may return before its writes are durable
//     (pebble: applied without a sync; one WAL sync a few milliseconds
//     later covers every deferred commit applied meanwhile). The rule
//     above still holds for every Update without the flag, so an empty
//     Update is the "sync everything deferred so far" call; under
//     WithUnhurriedDurability it waits for the deferred sync instead of
//     forcing one. Backends that cannot defer (PostgreSQL, Redis for now)
//     ignore both flags.
//   - Close waits for calls in flight, then releases the backend; later
//     calls return ErrClosed. Close is idempotent.
//
// # The event log
//
// The filer's metadata event log is an ordinary key range: each record is
// written under SeqKey(prefix, seq) in the same Update as the change it
// describes, with seq taken from NextSeq. Because NextSeq is a
// read-modify-write of one counter key inside a serialisable transaction,
// sequence numbers are unique and ordered across all filers sharing the
// store, and gap-free: an aborted transaction rolls its number back with
// it. The price is that all logged changes serialise on that key.
package store
