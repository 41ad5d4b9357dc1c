// Package linz holds the linearizability tests of Kelp's client APIs: a
// key-value workload run by several concurrent clients through the filer
// HTTP API and through the S3 gateway of an in-process cluster, while faults
// are injected (bridge pauses, blackholes and dropped connections in front of
// the filer, the gateway and each volume server; master leader kills). The
// histories (call and return times of every operation) are checked with
// porcupine against a register per key. docs/consistency.md says what each
// API promises; these tests check exactly that.
//
// KELP_LINZ_OPS sets the number of operations per test (default small, for
// CI); KELP_LINZ_VIS names a directory where a history that fails the check
// is written as porcupine's HTML visualization.
//
// Only tests live here.
package linz
