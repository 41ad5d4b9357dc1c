// Package client talks to a Kelp cluster over its public HTTP API: it asks a
// master for file ids (assign) and volume locations (lookup), and reads, writes
// and deletes needles on volume servers.
//
// It owns the client-side policies every caller would otherwise re-invent:
//
//   - master fail-over: Config.Masters is tried in order on connection errors
//     and 502/503/504/429 answers, and a redirect or a {"leader": "host:port"}
//     hint in an error answer moves the client to the leader; the master that
//     answered last is tried first. While no master can answer (the leader
//     died and an election is running), assign and lookup retry with
//     exponential backoff for up to Config.MasterWait (10 s), then fail;
//   - a volume location cache (Config.LookupTTL, 10 minutes by default) that is
//     dropped for a volume as soon as a read or delete on it fails;
//   - fail-over across a volume's replicas on reads and deletes, healthiest
//     replica first: a server that failed or did not answer is tried last
//     until a background probe (GET /healthz) or a request finds it
//     answering again, and a read gives up on a silent replica after
//     Config.FailoverAfter (1 s) when another one is left (health.go);
//   - Put = assign + upload, retried with a NEW assignment (bounded by
//     Config.MaxRetries) when the volume server refuses the write (full or
//     read-only volume, 5xx, connection error): a file id is never reused after
//     a failed upload; all of a Put's assigns share one MasterWait;
//   - a tuned HTTP/1.1 transport for many small concurrent requests to few hosts.
//
// Errors are prefixed "client:". A non-2xx answer is a *HTTPError carrying the
// status and the server's {"error": "..."} message; a 404 also matches
// ErrNotFound with errors.Is.
//
// Who imports it: services that are clients of other services (volumeserver
// replication, shell, adminui), benchmark and tests. It imports only leaves
// (fid) and the standard library; it defines no on-disk format.
//
// A Client is safe for concurrent use by many goroutines. The only
// goroutines it starts are probes of suspect volume servers, one at a time
// per server, each ending within Config.AnswerTimeout.
//
// The sub-package clienttest holds an in-memory fake master and volume server
// implementing the same public API, for tests of this package and its users.
package client
