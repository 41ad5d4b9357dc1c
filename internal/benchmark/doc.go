// Package benchmark is the engine of `kelp benchmark`: it measures a
// cluster's small-file write and read throughput through the public API, the
// way a user's application would see it.
//
// The write phase has Concurrency workers store N files of Size random bytes,
// each with exactly ONE assign and ONE upload: a failed write is counted as
// failed, never retried with a new assignment, so the figures are not
// flattered by hidden retries. The read phase reads every file written back
// in random order with the same number of workers and checks its size and
// CRC-32C. Each phase reports requests, failures, seconds, requests/s (of
// successful requests), MB/s (10^6 bytes, of successful requests) and the
// latency percentiles p50, p90, p99 and max of the successful requests,
// measured per request (assign+upload for a write, lookup+GET+body for a read)
// and kept in one preallocated slice, sorted once.
//
// Who imports it: cli (the `benchmark` sub-command) and tests. It imports
// client. It defines no on-disk format and leaves the files it wrote in the
// cluster.
package benchmark
