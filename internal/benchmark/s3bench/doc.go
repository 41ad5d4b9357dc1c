// Package s3bench is the engine of `kelp benchmark s3`: it measures an S3
// endpoint (Kelp's gateway or any other) with the AWS SDK for Go v2, the
// client most applications use, so the figures are what they would see.
//
// A run has two phases. PUT: Concurrency workers store Count objects of Size
// bytes under a fresh prefix of Bucket (created when missing). An object
// larger than PartSize is sent by the SDK's upload manager as a multipart
// upload with PartConcurrency parts in flight, read straight from the
// content generator (no part is buffered); smaller ones are one PutObject.
// GET: the same workers read every object stored back in random order. An
// object larger than PartSize is read as PartSize ranges, PartConcurrency at
// a time; every body is streamed through a fixed buffer and compared with
// the bytes that were written, so no object is ever held whole in memory.
//
// Contents are a pure function of (seed, object index, offset): a 1 MiB
// random template, shifted per object, with the object's index and the
// run's nonce stamped in its first 16 bytes. That lets any range be checked
// on its own, and a GET that returns another object's bytes fails.
//
// Each request is sent once (the SDK's retries are off), so a failure is
// counted, not hidden. By default payloads are sent as UNSIGNED-PAYLOAD and
// the SDK computes no CRC checksums, so the client's hashing does not compete
// with the server for the CPU; SignPayload and Checksums turn them on.
//
// Each phase reports the same figures, with the same JSON names, as `kelp
// benchmark` (benchmark.Phase): requests, failed, requests_per_sec,
// mb_per_sec (10^6 bytes/s), p50/p90/p99/max latency in ms, seconds.
//
// Who imports it: cli (the `benchmark s3` sub-command) and tests. It imports
// benchmark for the Phase type only. It defines no on-disk format; unless
// Cleanup is set it leaves its objects in the bucket.
package s3bench
