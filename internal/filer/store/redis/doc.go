// Package redis is a store.Store in Redis (github.com/redis/go-redis/v9),
// for filers that share one namespace.
//
// Layout (format 1), all under one key prefix (Options.Prefix, default
// "{kelp}:" — the braces make every key hash to one Redis Cluster slot, so
// that a transaction never spans slots):
//
//	<prefix>format   the string "1"
//	<prefix>idx      sorted set of every store key, all scores 0
//	<prefix>v:<key>  the value of <key>, a string
//
// Members of a sorted set with equal scores are ordered bytewise (memcmp),
// so ZRANGEBYLEX over idx gives the ordered scans store.Store promises; the
// value keys give O(1) Get.
//
// Transactions are optimistic: a transaction runs on one connection, sends
// WATCH for every value key before it reads it (and for idx before its
// first scan), buffers its writes, and commits them with MULTI/EXEC, which
// Redis refuses if anything watched changed meanwhile; then fn is run again
// after a jittered backoff, up to Options.MaxRetries times. A transaction
// whose fn fails, and every View, still ends with an (empty) EXEC to learn
// whether what fn read was consistent: if not, the error may be an artefact
// of a torn read and fn is retried instead of returning it. Watching idx
// means that a transaction that scanned conflicts with any concurrent
// insert or delete of a key, anywhere — correct, but a hot namespace with
// long scans inside transactions will retry often.
//
// Store.Get and Store.Scan do not watch: Scan fetches pages of keys, then
// their values, and skips keys deleted in between.
//
// Durability is Redis's: run it with appendonly yes and appendfsync always
// (or everysec, accepting the loss of the last second) to keep metadata.
//
// Imported by internal/cli (wiring) and tests.
package redis
