// Package fsview is the POSIX view of a filer directory that the FUSE
// mount (internal/fuse) and the WebDAV server (internal/webdav) share:
// lookups and attributes, directories, files open for reading and writing,
// renames, hard and symbolic links, extended attributes, and an errno for
// every failure (Errno).
//
// It talks to the filer over gRPC (filer.proto) and stores file data on the
// volume servers itself, through internal/client with the masters the filer
// names (GetConfiguration): file bytes never pass through the filer.
//
// # Open files and the write-back buffer
//
// All handles of one file in one view share a file (file.go): the entry as
// last committed plus a write buffer. Writes land in chunk-sized,
// chunk-aligned blocks; a block written whole is uploaded in the background
// at once, at most 64 MiB of uploads at a time (small uploads counting
// as 1 MiB each). Flush (close(2), fsync(2)) uploads
// what is left (the dirty span of each block as one chunk, the gaps read
// from what is there) and commits the new chunks, size and mtime in one
// UpdateEntry: data is durable on the volume servers and the entry in the
// filer's store when Flush returns. Chunks appended later shadow earlier ones
// (package chunk), so a random write never rewrites what it does not touch.
// A file with more than 8 uploaded, uncommitted chunks commits those done
// (the oldest first, the others staying in flight) while it is written,
// which bounds its memory.
//
// A caller may instead close a handle with StartFlush and ReleaseLater (the
// FUSE mount does): the uploads start, and after the last release the file
// is committed in the background, at most 64 files at a time, while it stays
// open in the view (reads, stat and a new open see the buffer; attribute
// changes join the commit; so do chmod, chown and utimens of a file still
// open here). With Config.AsyncCreate, a create of a name known absent
// answers before the filer has made the entry: the create is held for the
// file's first commit, which makes the entry with its data in one
// CreateEntry, and sent alone after createHold or when anything else needs
// the name in the filer (see Config.AsyncCreate). Sync (FSYNCDIR, unmount), a handle's Flush, and
// a rename, unlink or link of the file commit it at once.
//
// # Chunk cache
//
// With Config.CacheDir, reads go through an on-disk cache of whole chunks
// (chunkcache.go), least recently used evicted first to stay under
// Config.CacheSize; chunks never change, so nothing is invalidated, and
// what is in the directory at start is used.
//
// Reads see the committed content with the buffer laid over it. A read
// that continues the previous one fetches 4 MiB ahead; a read at the start
// of a file of at most 4 MiB fetches the whole file (cat, cp: one request);
// others fetch at least 128 KiB. The file's lock is let go while chunks
// are fetched, so the kernel's parallel reads of one file overlap.
//
// # Consistency
//
// Close-to-open, as NFS: a file opened here reads the entry as the filer has
// it at open time; what other clients write shows after they close and this
// view opens the file again. OpenForReading starts fetching a small file
// from its cached entry while the open asks the filer, and fetches ahead
// along a directory read in name order; those bytes are used only if the
// filer's entry at the open has the same chunks (spec.go).
//
// The view caches the entries it looked up or listed (cache.go), so that
// ls -l after a listing costs no round trip per name. The cache is only
// used while the filer's SubscribeMetadata stream is connected (from the
// event sequence number GetConfiguration reported): each event evicts the
// paths it touches (a directory with its cached subtree), and the view
// evicts its own changes at once. When the stream breaks the cache is
// emptied and bypassed until it reconnects. A lookup answer is stored only
// if neither its path nor a directory above it was evicted while it was on
// its way, so a stale answer never lands in the cache, and changes
// elsewhere (another client writing) do not keep it out. The FUSE mount
// also lets the kernel cache attributes
// and names for one second.
//
// The cache also keeps the names of the directories listed or made here
// (metaCache.dirs), updated by each event: a name absent from one is
// ENOENT without a round trip (IsCachedAbsence), unless this view changed
// that name and its event has not arrived yet (own changes are counted
// until then, since an older event of the name may still be on its way).
//
// # Hard links, unlinked open files
//
// The filer has no hard links. The first link(2) of a file moves its entry
// to /.kelp/links/<id> (a rename: no data moves) and leaves at each name an
// entry without chunks whose xattr kelp.hardlink holds the id; the content
// entry counts the names in xattr kelp.nlink. Writes, attributes and xattrs
// through any name go to the content entry; the last unlink removes it. The
// filer's HTTP GET follows kelp.hardlink, so a linked file reads the same
// through the filer API. Other gateways (S3) see a linked name as empty.
//
// A file unlinked while open here is renamed to /.kelp/unlinked/<id> and
// deleted when its last handle is released (a deleted entry's chunks would
// be garbage-collected at once). /.kelp is hidden from the root's listing.
//
// # Directory times
//
// The filer moves a directory's mtime and ctime when a name in it is added
// or removed, to within a second (filer.namesChanged). The view keeps the
// time of its own changes of names (dirTouches) and shows a directory's
// times no older than that, so a stat right after a create here shows it;
// a Setattr of a directory's mtime first waits for the creates on their
// way (settle), which would otherwise move it after the fact.
//
// # Inode numbers
//
// A file's inode number is a hash of its creation time (kept by renames, never
// shared by a new file at the same path, which a kernel still holding the old
// inode would take for the old file); a hard-linked file's is a hash of its
// link group. The numbers are the same on every mount.
//
// # Not kept
//
// Access times (atime reads as mtime). FIFOs, sockets and devices are
// names with a type (and a device number, xattr kelp.rdev): the kernel
// runs the pipe or socket, and the FUSE mount is nodev.
package fsview
