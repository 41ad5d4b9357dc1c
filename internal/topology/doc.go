// Package topology is the master's model of the cluster: data center -> rack
// -> server (node) -> disk -> volumes, built from the volume servers'
// heartbeats, and the decisions made from it: which writable volume an assign
// uses, where a volume lives, and where new volumes go.
//
// It is pure: no network, no protobuf, no clock (callers pass `now`) and no
// hidden randomness (Options.Intn is injected). Only internal/master imports
// it.
//
// # Heartbeats
//
// Every heartbeat carries a node's full state and replaces what the model had
// for that node. A node not heard from for the dead timeout is dropped by
// ExpireNodes; a node whose stream closed cleanly is dropped by RemoveNode.
//
// A node may also be marked unreachable (SetReachable) by the master's
// probes: it stays in the model, but its copies count as missing and
// placement skips it.
//
// # Volume layouts
//
// Volumes are grouped by (collection, replication, ttl). A volume is writable
// when every copy its replication code asks for is present, no copy is
// read-only, and no copy has reached the volume size limit.
//
// # Placement
//
// PlanGrowth places each copy of a new volume by the replication code XYZ: the
// first copy on a main server in a main rack of a main data center, Z copies on
// other servers of the main rack, Y copies in Y other racks of the main data
// center, and X copies in X other data centers, one per data center. Among the
// eligible servers it prefers those with the most free volume slots. It never
// puts two copies where the code says they must differ, and when no valid
// placement exists it says what is missing (errors wrap ErrNoPlacement).
package topology
