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
// The requests go through a lean HTTP/1.1 client (rawhttp.go: one kept-alive
// connection per worker and server, the request written and the answer read
// on the worker's goroutine), so that the client's own CPU does not crowd
// out the cluster's on a shared machine; Config.NetHTTP, a Config.HTTPClient
// and TLS use the library client (net/http) instead.
//
// Config.Save writes the list of files written (files.go: a header line,
// then "<fid> <crc32c hex>" per file); Config.ReadsFrom skips the write
// phase and reads such a list again, so the same reads can be measured
// before and after a change of the cluster (erasure coding, a lost server).
//
// Who imports it: cli (the `benchmark` sub-command) and tests. It imports
// client. Its only file format is that list; it leaves the files it wrote in
// the cluster.
package benchmark
