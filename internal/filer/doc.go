// Package filer is Kelp's namespace: directories, files and symlinks with
// their attributes, each file a list of chunks (package chunk) whose blobs
// live on volume servers. It owns path rules, the entry and event encodings,
// the key layout in the metadata store, atomic rename, chunk garbage
// collection and the metadata event log.
//
// Imported by services (filerserver) and shared layers (objectapi, fsview).
// It imports the store interface (filer/store) and package chunk, never
// pb, net/http or gRPC; the blob layer is the chunk.Blobs interface, which
// the service implements over internal/client.
//
// # Paths
//
// A path is absolute, '/'-separated, with no empty, "." or ".." component
// and no NUL byte; a name is at most MaxNameLen bytes and a path at most
// MaxPathLen bytes (so that its key fits the store's key limit). A trailing
// '/' and repeated '/' are tolerated and cleaned. Anything else is
// ErrInvalidPath. The root "/" always exists; its entry is stored once its
// attributes change (before that it is a directory of mode 0755).
//
// # Key layout (all in one store.Store)
//
//	"d" + parent + 0x00 + name   -> entry   (parent is "/" or "/a/b", name has no '/')
//	"r"                          -> the root's entry
//	"s"                          -> 8-byte big-endian last event sequence (store.NextSeq)
//	"e" + seq (8 bytes BE)       -> event
//	"t"                          -> 8-byte BE highest event sequence deleted by retention (retention.go)
//	"G" + unix ns (8 bytes BE) + fid -> GC record: 1 flag byte (bit 0: manifest) + a sealed manifest's key
//	"g" + fid                    -> GC record of older filers: flags + 8-byte BE unix ns + key (drained, never written)
//
// The children of directory D are the keys with prefix "d"+D+0x00, in name
// order (names hold no 0x00); D's deeper descendants are the keys with
// prefix "d"+D+"/". Rename of a directory rewrites both ranges in the same
// transaction as the directory's own key, so readers see the old tree or the
// new one, never a mix.
//
// # Entry encoding (version 1)
//
// Byte 1, then: uvarint mode (os.FileMode bits), uvarint uid, uvarint gid,
// varint mtime, ctime, crtime (unix ns; 0 = unset), string mime, uvarint
// size, bytes md5, string symlink target, uvarint n + n (string key, string
// value) user metadata, uvarint n + n (string name, bytes value) xattrs,
// then the chunk list (chunk.AppendList). Strings and bytes are uvarint
// length + data. The path is not stored: it is the key. Unknown versions
// are ErrCorrupt.
//
// # Event encoding (version 1)
//
// Byte 1, type byte (1 create, 2 update, 3 delete, 4 rename), varint unix ns,
// flags byte (bit 0: old entry present, bit 1: new entry present), then for
// each present entry: string path, bytes entry encoding.
//
// # Event log
//
// Every change writes its events in the same transaction, under sequence
// numbers from one counter key: gap-free and in commit order across every
// filer sharing the store. Subscribe reads from any sequence and then waits
// for new events (woken by local commits, polling for other filers'). A
// recursive delete or a directory rename is one event for the directory;
// the descendants' change is implied. Parents created implicitly get their
// own create events. The log is kept whole (no trimming yet).
//
// # Garbage collection
//
// Chunks that no entry references any more (replaced, shadowed by an
// overwrite, deleted) are queued under "G", by the time they were dropped,
// in the transaction that drops them, so a crash cannot leak them; a
// background worker deletes the blobs and then the records once
// Config.GCDelay has passed, so that reads that opened the old entry finish. A manifest is expanded first: its chunks are queued,
// then its own blob deleted. Several filers may drain one queue; a second
// delete of a blob finds it missing, which counts as done. Chunks uploaded
// for a write whose transaction failed are queued too; only a crash between
// upload and commit leaks blobs.
package filer
