// Package volumeserver is the network edge of one volume server: the HTTP data
// path (PUT/POST, GET/HEAD, DELETE of file ids), the gRPC admin API the master and
// the shell call (allocate, delete, mark, vacuum, status, and the Ec* calls of
// erasure coding), reads and deletes of needles in erasure-coded volumes and
// the shard range reads between servers behind them (ec.go, ecadmin.go), and the heartbeat stream
// that reports this server's disks and volumes to the master.
//
// It owns no storage logic: volumes live in internal/store and internal/volume.
// Wire types (pb, HTTP) stop here; errors from the store are mapped to HTTP status
// codes in exactly one table (errors.go).
//
// Imported only by internal/cli and internal/testcluster.
package volumeserver
