// Package consensus is the master's replicated state machine, run on a
// hashicorp/raft group. It owns the cluster-wide facts that must survive a
// restart and (with several masters) a change of leader:
//
//   - the file-key ceiling: every needle key below it may have been handed out;
//   - the largest volume id ever allocated;
//   - cluster settings (volume size limit, default replication per collection);
//   - the admin lock with its lease, taken by the shell for exclusive operations.
//
// File keys are handed out from memory. The leader reserves a block of keys
// (Config.KeyBlock, 100,000 by default) with one raft Apply and serves assigns
// from it, so an assign normally costs a mutex, not a raft round trip. Because a
// reservation is committed before any key of its block is used, a new leader
// (or the same master after a restart) always starts above every key the old
// one could have handed out; the unused rest of a block is simply skipped.
//
// The admin lock is taken with token 0 (failing with ErrLocked while anyone's
// lease runs) and renewed with the token it returned; a settings change may
// carry a lock token, and the state machine then applies it only if that
// token holds the lock at the leader's clock, so check and change are one
// step.
//
// With several members, Config.HeartbeatTimeout (default 400ms) sets raft's
// heartbeat and election timeouts; a dead leader is replaced within about two
// to three of them. Leader reports no leader on a follower that has not heard
// from it for half that timeout, so that callers stop sending clients to a
// leader that has probably died, well before raft's own election starts.
//
// Commands are small typed structs, encoded as one version byte, one type byte
// and a JSON body (see command.go). Snapshots are the JSON of State.
//
// On disk, under Config.Dir:
//
//	raft.db      bbolt file: raft log and stable store (format in logstore.go)
//	snapshots/   raft file snapshots (state.json inside each)
//
// Only internal/master imports this package. It uses no network types besides
// raft's own TCP transport.
package consensus
