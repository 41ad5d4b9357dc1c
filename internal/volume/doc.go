// Package volume implements one append-only volume: a data file of needle
// records, an index file, and an in-memory index, with crash recovery, group
// commit and online compaction (vacuum).
//
// It owns the files of one volume; the store package owns the directory.
// It imports needle, vfs and the leaves; store and the erasure coder import
// it. Nothing here speaks a network protocol.
//
// # API
//
//	Create(Config) (*Volume, error)  // new, empty volume; fails if the .dat exists
//	Open(Config) (*Volume, error)    // load and recover
//	(*Volume).Write(ctx, needle.Meta, io.Reader, size) (WriteResult, error)
//	(*Volume).Read(key, cookie) (*Object, error)   // Object: Meta, Size, ETag, ModTime, Read/Seek/ReadAt, Bytes, Close
//	(*Volume).Delete(ctx, key, cookie) (freed int64, error)
//	(*Volume).Vacuum(ctx) error
//	(*Volume).Stats() Stats; SetReadOnly(bool) error; SetSizeLimit(int64); Close() error; Destroy() error
//
// Errors (wrapped; use errors.Is): ErrNotFound (unknown or expired key),
// ErrDeleted, ErrCookieMismatch (read, overwrite or delete with the wrong
// cookie), ErrReadOnly, ErrFull (the write would pass SizeLimit), ErrTooLarge,
// ErrNoSpace (ENOSPC; the partial record is cut off and the volume stays
// usable), ErrShortBody, ErrBroken (an fsync or cleanup failed: the volume
// refuses writes until reopened), ErrClosed, and needle.ErrCorrupt.
//
// # Files
//
// In Config.Dir, with base "<collection>_<id>" ("<id>" for the empty collection):
//
//	base.dat  superblock (32 bytes) then needle records, 8-aligned (needle package)
//	base.idx  16-byte index records (needle package) in append order; a cache
//	base.ckp  checkpoint, 40 bytes (below)
//	base.cpd, base.cpx   the new .dat and .idx while a vacuum runs; removed on Open
//
// Checkpoint (.ckp), written atomically (tmp file, fsync, rename, fsync dir):
//
//	0  magic "KCKP"; 4 version u32 (1); 8 compaction revision u32; 12 reserved u32
//	16 N: index entries valid, u64;  24 D: .dat verified up to, u64
//	32 CRC32C of the first N*16 bytes of the .idx, u32;  36 CRC32C of bytes 0..35, u32
//
// It says: the .dat is synced and valid up to D, and the first N .idx records
// are synced and describe exactly the records before D.
//
// # Durability and recovery
//
// A write builds its record (small needles) or streams it (records over
// 1 MiB) at the tail of the .dat under the append lock, publishes it in the
// in-memory index, appends the index record to a buffer, and, with
// Config.Fsync, waits for the group-commit syncer: one goroutine per volume
// calls fdatasync on behalf of every writer that appended before the sync
// began, so concurrent writers share fsyncs. A failed fsync is sticky: the
// volume stops accepting writes (Stats().ReadOnly), calls Config.OnChange,
// and never again reports an append durable (a later fsync that succeeds
// proves nothing about the pages the failed one could not write).
//
// The rule, with Config.Fsync: an answer that reports success promises
// that what it describes survives a power cut, so it is given only once
// that is on disk — even when this call wrote nothing itself:
//
//   - Write returning nil: the needle as written is durable. That includes
//     Unchanged: the identical record already stored may be a concurrent
//     write (a client's retry racing its first attempt) still waiting for
//     its fsync, so Unchanged waits for every append published so far.
//   - Delete returning the freed size: the tombstone is durable. Delete
//     returning ErrDeleted, which callers treat as "done", waits the same
//     way, for the tombstone it found. ErrNotFound promises nothing.
//   - Vacuum returning nil: the new .dat is synced and renamed into place
//     and the directory synced; appends made meanwhile are in it.
//   - SetReadOnly, SetReplication, Create, Open (after recovery) and Close
//     return only after their files (and directory entries) are synced.
//
// Without Config.Fsync only a process crash (kill -9) is survived: data is
// in the kernel's page cache when the call returns.
//
// Reads may see a record before it is durable (reads never wait); a
// record read that way can vanish in a power cut only if its writer has
// not been answered yet or got an error.
//
// The .idx is only a cache. Every CheckpointInterval (if anything changed)
// and on Close the buffered index records are written, the .idx and .dat are
// synced and the checkpoint is replaced. Open trusts the first N index
// records if the checkpoint is intact, its revision matches the superblock,
// D fits in the .dat, and the CRC of those records matches; otherwise it
// rebuilds the index from the whole .dat. It then scans the .dat from D (or
// from the superblock), checking each record's CRC, re-creates the index
// records for the good ones and truncates the .dat at the first torn or
// corrupt record. So after kill -9 or power loss every acknowledged record
// survives, and an .idx that is behind, ahead, damaged or missing is
// repaired.
//
// Cutting at the first bad record is safe although a power cut can lose
// unsynced pages anywhere in the unsynced region, keeping later ones: the
// .dat is append-only, and every fdatasync covers the whole file, so each
// acknowledged record lies before the end of the last completed sync and
// each lost or torn byte after it. Any record after a bad one was appended
// later, hence after that point too, and was never acknowledged.
//
// # Reads
//
// The in-memory index maps key to (offset/8, body size) in 10 bytes per
// needle (see index.go). A needle whose record is at most 1 MiB is read with
// exactly one positioned read, and its CRC verified before Read returns.
// Larger needles are opened with a small read of the header and metadata
// (plus one of the 8-byte trailer for the ETag); their data is read on
// demand, and reading it sequentially to the end verifies both checksums.
// Reads never take the append lock.
//
// A needle's TTL, or the volume's when the needle has none, counts from its
// append time; an expired needle reads as ErrNotFound and is dropped by vacuum.
//
// # Vacuum
//
// Vacuum copies the live, unexpired needles (in file order) into .cpd/.cpx
// with the compaction revision bumped, while reads and writes continue; it
// then copies the records appended meanwhile, in up to three unlocked rounds,
// and finally, under the append lock, the last few. It syncs the new files
// and renames .cpd over .dat — the commit point — then syncs the directory,
// swaps the files in memory, renames .cpx over .idx and writes a checkpoint.
// A crash before the rename leaves the old volume (leftovers are removed on
// Open); after it, the new .dat, whose revision no longer matches the old
// checkpoint, so its index is rebuilt from the .dat. The old .dat stays open,
// reference-counted, until the last Object reading it is closed.
//
// Stats().GarbageRatio is the bytes of deleted and overwritten records and
// tombstones divided by the data bytes of the .dat.
//
// # Limits
//
// Offsets are stored in 8-byte units in 32 bits: a volume is at most 32 GiB.
// Appends are serialized, so a large needle streamed from a slow reader
// delays other writes to the same volume: hand Write a local (spooled) body.
package volume
