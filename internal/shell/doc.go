// Package shell is Kelp's admin shell (`kelp shell`): an operator's commands
// to look at the cluster and change it — the admin lock, cluster settings,
// the volume tree, replication repair, balancing, vacuum, moves and deletes,
// and erasure coding (ec.go: ec.encode, ec.rebuild, ec.balance, ec.decode;
// shard placement comes from topology.ShardPlacer).
//
// It owns the command registry (shell.go: one table built explicitly in New,
// no init registration), one file per command family (lock.go, cluster.go,
// volume.go, move.go, collection.go), the connections to masters and volume
// servers (conns.go), the master's topology answer and its indexes (view.go),
// and how a command's steps are executed safely (exec.go). The planning behind volume.fix.replication and
// volume.balance is pure and lives in internal/topology (fix.go); this package
// only turns the master's answer into a topology snapshot and runs the steps.
//
// It talks to the cluster only through public gRPC APIs: the master's
// (masterpb: LeaseAdminLock, ReleaseAdminLock, Configure, Topology,
// ClusterStatus), tried in the configured order with fail-over on
// Unavailable, and the volume servers' (volumepb). Master addresses are HTTP
// host:port, whose gRPC port is port+10000 (pb.GRPCAddress), or
// host:port.grpcPort to name the gRPC port explicitly.
//
// Conventions: every command has SeaweedFS-style single-dash flags parsed by
// the standard flag package, so `cmd -h` prints its usage. Commands that
// change the cluster refuse to run unless this shell holds the admin lock
// (`lock`); the lock is leased from the master and renewed in the background
// by a goroutine owned by the Shell, stopped by `unlock` or Close. Dry runs
// (volume.fix.replication, volume.balance, collection.delete without -force)
// need no lock. ec.encode never deletes a volume's copies before every
// shard is on its holder, verified there, and shown by the master.
//
// Safety of long operations: a copy marks every copy of the volume read-only
// first (so the new copy is exact) and restores the ones that were writable
// when it ends, whether it succeeded, failed or was cancelled (Ctrl-C cancels
// the command's context); a copy that did not complete is deleted from its
// target; and a volume's copies are deleted only after every copy planned to
// replace them has completed and matches its source.
//
// Script mode (commands from stdin or -c) stops at the first failing command
// and reports failure, so `kelp shell` exits non-zero.
//
// Who imports it: internal/cli only. It defines no on-disk format besides the
// readline history file.
package shell
