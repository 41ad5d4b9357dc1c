// Package master is the master service: the network edge of the control
// plane. It serves the public HTTP API (/dir/assign, /dir/lookup,
// /dir/status, /cluster/status, /cluster/raft, /cluster/topology,
// /cluster/configure, /admin/lock, /admin/unlock, /vol/grow, /healthz; see
// docs/master.md) and the gRPC service kelp.master.Master (Heartbeat, Assign,
// Lookup, ClusterStatus and the admin calls LeaseAdminLock, ReleaseAdminLock,
// Configure, Topology, ReportVolumeFailure), keeps the topology from volume
// servers' heartbeats, grows volumes by calling AllocateVolume on volume
// servers, and stores what must survive in the raft state machine of
// internal/consensus.
//
// Ports: HTTP on Config.Port, gRPC on Port+10000, raft on Port+20000 unless
// configured otherwise. Peers are given as HTTP host:port; their raft address
// is derived the same way, and a master's raft id is its HTTP address, so the
// raft leader's id is the address clients are sent to.
//
// # Several masters
//
// Every master runs with the same Config.Peers. Followers forward the
// leader's work instead of redirecting (forward.go): HTTP requests through a
// reverse proxy, gRPC calls through a client of the leader, marked so that a
// forwarded request is never forwarded again. Lookups fall back to the
// follower's own topology while no leader can be reached, so reads go on
// during an election. A follower that cannot forward answers 503 with a
// {"leader": ...} hint when it knows one.
//
// Every master accepts heartbeats and names the leader in its answers; when
// the leader changes, open streams are told at once. Followers also copy the
// leader's topology every second (mirror.go), so that a newly elected leader
// can assign at once. For its first moments (until every known volume server
// has reported to it, at most 2s) a new leader answers "volume not found" and
// "no writable volume" with a 503 rather than a 404 or a volume growth: its
// copy may simply lag.
//
// File ids stay unique across leader changes because keys are handed out
// from blocks committed in raft before use (see internal/consensus).
//
// # Settings and the admin lock
//
// The volume size limit from Config is committed whenever a master becomes
// leader and it differs (the command line wins). The default replication
// from Config is only the initial value: it is committed when the cluster
// has none, and Configure (under the admin lock) changes it, or a
// collection's, at run time. Assign without a replication uses the
// collection's setting, else the cluster's.
//
// A volume server whose replicated write failed calls ReportVolumeFailure:
// the volume leaves assigns until every copy has sent a heartbeat after the
// last report and Config.FailureCooldown has passed (topology.ReportFailure).
// These marks are the leader's alone and are not carried over a leader
// change. A volume with fewer copies than its code asks for is never
// writable.
//
// Heartbeats do not prove that a volume server can be reached: every master
// probes each one at its advertised gRPC address once a pulse and marks it
// unreachable after two failures in a row (reach.go); its copies then count
// as missing and growth skips it. Growth that fails part way deletes the
// copies it made and pauses automatic growth of the layout, 1s doubling to
// 30s (growth.go).
//
// Only internal/cli (and tests) import this package. It is the only place in
// the control plane where protobuf and HTTP types appear; errors are mapped to
// HTTP and gRPC codes in errors.go.
package master
