// Package vfs is the small file-system interface through which the data-plane
// core (volume, store, erasure) touches disks, so tests can substitute a file
// system that loses unsynced data or fails on demand.
//
// Implementations:
//
//   - OS: the real operating system (os package; File.Sync is fdatasync on Linux).
//   - MemFS from NewMem: an in-memory file system. Crash returns the state a
//     process crash (kill -9) leaves: everything written survives.
//   - MemFS from NewCrash: the same, but it tracks what was synced. Crash returns
//     the state after a power loss: see MemFS.Crash for the exact model.
//   - FaultFS from NewFaulty: wraps any FS and fails chosen operations (ENOSPC on
//     the Nth write, short writes, failing Sync, ...). It also counts operations,
//     which tests use to assert I/O patterns such as "one ReadAt per read".
//
// Contract shared by all implementations: paths use the host separator; a File
// is safe for concurrent ReadAt/WriteAt from several goroutines (like *os.File);
// Write and Truncate must not race with each other. Directory entries (create,
// rename, remove) are only durable after SyncDir on the parent directory.
//
// Who imports it: volume, store, erasure and their tests. It imports nothing of
// Kelp's.
package vfs
