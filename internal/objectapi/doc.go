// Package objectapi gives the filer's namespace S3 semantics: buckets,
// objects with their metadata, listings in key order, multipart uploads,
// checksums, conditional requests, tagging and bucket configuration. It
// speaks no HTTP: internal/s3 turns requests into calls here and maps the
// errors of this package (errors.go) to S3 error codes in one table.
//
// Imported by internal/s3 (and tests). It imports internal/filer,
// internal/chunk and internal/sse (the encryption format) only; the filer
// is reached through the Namespace interface (namespace.go), which
// *filer.Filer satisfies, so the gateway runs in-process next to a filer.
//
// # Layout in the namespace
//
// Buckets are the directories directly under Config.Root (default
// "/buckets"); the object "a/b/c" of bucket "photos" is the file
// /buckets/photos/a/b/c. Parent directories are created on write and
// removed again when their last object goes (unless they are themselves
// objects), so that a listing with delimiter "/" shows a common prefix only
// where objects are. A key ending in '/' ("a/b/") is the directory
// /buckets/photos/a/b marked as an object (xattr s3.object); it may have
// content, metadata and tags like any object.
//
// # Keys that are objects and prefixes at once (shadow.go)
//
// S3 allows "a", "a/" and "a/b" together; the path /buckets/photos/a is
// one entry, a file or a directory. While "a" collides with a directory
// (because "a/" or a key below "a/" exists), the latest version of the
// object "a" (or its delete marker) is the file
// Root + "/.shadows/<bucket>/<h>", h as for versions below, with the key in
// xattr s3.key, and the directory a carries the xattr s3.shadow = "1". The
// flag and the file change in one transaction (filer.Atomically): a write
// that finds a file where it needs a directory (PUT "a/b" over the object
// "a") renames the file there and puts a flagged directory in its place;
// a write of "a" that finds a directory writes the shadow file and sets the
// flag. When the last entry below a flagged directory goes and it is no
// directory object, the directory is removed and the shadow file renamed
// back to /buckets/photos/a. So:
//
//   - keys that collide with nothing are exactly as before: the file at the
//     key's path; a GET is one lookup, an unversioned PUT one create (a
//     create that meets a directory or a file in the way is retried in a
//     transaction that sorts it out);
//   - reading a shadowed key costs a second lookup, and a listing one
//     lookup per flagged directory it passes; the listing reports the
//     shadowed key where a file of that name would sort ("a" < "a!" <
//     "a/"), so S3's order holds;
//   - moves are renames, so every chunk always belongs to exactly one
//     entry and the filer's garbage collector needs no help;
//   - the filer's own view (its HTTP API, a mount) shows the directory a
//     only: the object "a" is visible through S3 alone while "a/..."
//     exists. A reserved child name inside the directory could not work:
//     every name but "." and ".." is a possible key component.
//   - removing the directory a through the filer (not S3) orphans the
//     shadow file, as it orphans a key's noncurrent versions: S3 no longer
//     sees it; the next collision of that key replaces it (collecting its
//     chunks) and DeleteBucket removes what is left.
//
// Why not other layouts: keeping the object on the directory entry itself
// would put two objects' chunks in one chunk list (or chunks outside any
// list, collected by hand), and archiving a version would have to move
// chunks between entries, which only a rename does safely. Objects in a
// separate tree for every key would double each listing's calls.
//
// Multipart uploads live under Root + "/.uploads/<bucket>/<upload id>": the
// upload directory carries the future object's metadata, each part is a
// file named by its five-digit number whose chunks are kept in the xattr
// s3.chunks (not in the entry's chunk list, so that removing the part entry
// does not garbage-collect them). Completion creates the object entry from
// the parts' chunks with shifted offsets, no data is copied, and then
// deletes the upload directory; the blobs of parts left out of the object
// (and of aborted uploads) are deleted through the blob layer directly.
// A part uploaded again replaces the earlier part entry in one transaction,
// which collects the old part's blobs; completion checks in its own
// transaction that the parts it read are still there (and starts over if
// not), so that no blob leaks and no object loses its data. A completed
// upload leaves a record, Root + "/.completed/<bucket>/<upload id>", made
// in the completion's transaction, so that completing it again with the
// same parts answers the same result for CompletedUploadTTL; ApplyLifecycle
// removes older records.
// Bucket names cannot start with '.', so ".uploads", ".completed",
// ".versions" and ".shadows" never show as buckets.
//
// # Versions (versioning.go, version_delete.go, list_versions.go)
//
// A bucket's state is its xattr s3.versioning: absent (never versioned),
// "Enabled" or "Suspended". An unversioned bucket works exactly as above:
// a PUT is one filer call that replaces the object, and objects carry no
// version attribute (their id is "null").
//
// The latest version of a key is always at the key's path, so ListObjects,
// GET and small PUTs read and write where they always did. It is either an
// object or a delete marker: a file with no chunks and xattr s3.dm = "1".
// A version's id is its xattr s3.vid; absent means "null". Ids made while
// Enabled are 32 hex digits: 16 of the inverted creation time in ns, then
// 16 random, so ids are unique and a newer id sorts first bytewise.
//
// Noncurrent versions live in Root + "/.versions/<bucket>/<h>/<name>",
// where h is the hex of the first 16 bytes of SHA-256(key) (a key can be
// longer than a name and hold '/'); the directory h carries the key in
// xattr s3.key. name is the version id, or for a null version 16 hex
// digits of its inverted mtime + "null", so a key's versions list newest
// first. A write to an Enabled bucket renames the current entry into that
// directory (Rename keeps the chunks: no data moves) and then creates the
// new entry exclusively, retrying the pair if another writer got between
// them; a Suspended bucket archives a non-null current version, deletes
// the null one wherever it is (its chunks collected) and writes a new null
// version. Deleting the current version by id renames the newest
// noncurrent one over it in one transaction (collecting its chunks).
//
// Invariant: a key has noncurrent versions only while its path holds a
// version (or, for a shadowed key, its shadow file does), so
// ListObjectVersions walks the bucket as ListObjects does (delete markers
// included) and reads each key's versions directory.
// ListObjects skips delete markers and, in a bucket that was ever
// versioned, common prefixes whose directory holds only delete markers.
// Directory objects ("a/") are not versioned: they are replaced in place
// and have the one version "null".
//
// # Attributes (version 1 of the layout)
//
//	Entry.Mime                    Content-Type
//	Entry.Meta["x-amz-meta-NAME"] user metadata, NAME lower-case
//	Entry.Meta["content-encoding" | "content-disposition" | "content-language" |
//	           "cache-control" | "expires"]       stored as sent
//	Xattrs["s3.etag"]             ETag when it is not the content MD5 (multipart)
//	Xattrs["s3.checksum"]         "ALGORITHM:base64[:COMPOSITE|FULL_OBJECT]"
//	Xattrs["s3.tags"]             URL query encoding of the tag set
//	Xattrs["s3.object"]           "1" on a directory that is also an object
//	Xattrs["s3.acl"]              canned ACL of a bucket or object (private, public-read, ...)
//	Xattrs["s3.grants"]           explicit ACL instead (JSON list of Grant, acl.go)
//	Xattrs["s3.owner"]            owner's canonical id, on buckets and objects (absent:
//	                              no owner / the bucket's owner)
//	Xattrs["s3.ownership"]        a bucket's object ownership setting (ownership.go)
//	Xattrs["s3.pab"]              a bucket's public access block (JSON)
//	Xattrs["s3.cors"]             a bucket's CORS configuration (JSON, see cors.go)
//	Xattrs["s3.policy"]           a bucket's policy document (JSON as sent, checked
//	                              by ParsePolicy in policy.go)
//	Xattrs["s3.key"], ["s3.chunks"] an upload's key / a part's chunk list;
//	                              s3.key also on a key's versions directory
//	                              and on a shadowed object's file
//	Xattrs["s3.shadow"]           "1" on a directory whose key is also an
//	                              object kept under .shadows
//	Xattrs["s3.initiator"]        an upload's creator (canonical id)
//	Xattrs["s3.partlist"]         a completed upload's record: "N:ETAG,..."
//	Xattrs["s3.versioning"]       a bucket's versioning state
//	Xattrs["s3.vid"]              version id (absent: "null")
//	Xattrs["s3.dm"]               "1" on a delete marker
//	Xattrs["s3.lock"]             a bucket's object lock configuration (JSON
//	                              ObjectLockConfig); present: the bucket has object lock
//	Xattrs["s3.lock.mode"]        a version's retention mode, GOVERNANCE | COMPLIANCE
//	Xattrs["s3.lock.until"]       its retain-until date, RFC 3339 UTC with nanoseconds
//	Xattrs["s3.lock.hold"]        "1" while a version is under legal hold
//	Xattrs["s3.sse"]              an encrypted object's or upload's sse.Meta (JSON)
//	Xattrs["s3.ssepart"]          an encrypted upload part's sse.Part (JSON)
//	Xattrs["s3.encryption"]       a bucket's default encryption (JSON BucketEncryption)
//
// (The lock xattrs of a version are also kept on an upload's directory until
// completion.)
//
// # Object lock (objectlock.go)
//
// A locked version (legal hold, or retention not yet ended) is never
// removed: deleteVersion (current and noncurrent versions), removeObject
// and putDirObject (directory objects, which are not versioned) call
// checkUnlocked, inside the transaction that removes it where there is one;
// lifecycle expiry skips what it refuses. GOVERNANCE retention yields to a
// context from WithGovernanceBypass. A bucket with object lock is always
// versioning Enabled, so writes archive what they replace.
//
// # Server-side encryption (encryption.go)
//
// A write with an Encryption (Metadata.Encryption) streams the plaintext
// through the checksum and MD5 hashes, then through sse.Encrypter, and
// only then into chunks: Entry.Size and the chunks are the ciphertext's,
// ObjectInfo.Size, PartSizes (s3.parts holds plaintext sizes for encrypted
// objects) and checksums the plaintext's. Entry.MD5 is the ETag's MD5: of
// the plaintext for unencrypted and SSE-S3 objects, of the ciphertext for
// SSE-C and SSE-KMS. Each part of an encrypted upload is encrypted with the
// upload's data key and its own nonce base; completion gathers the parts'
// sse.Part into the object's sse.Meta. Reads of an encrypted object (GET,
// the source of a copy or of UploadPartCopy) ask the caller's KeyFunc for
// the data key and decrypt only the segments their range overlaps.
//
// # Limits that come from the namespace
//
// A key is a path, so it cannot hold an empty component ("a//b"), "." or
// "..", or a NUL byte (ErrUnsupportedKey, a 400 InvalidArgument).
// Keys that are prefixes of other keys are no limit (see above);
// ErrKeyConflict (409 ObjectConflict) remains only for a namespace entry in
// a key's way that the layer cannot resolve, which its own writes never
// leave.
//
// All methods are safe for concurrent use; each write ends with one filer
// transaction (a versioned write archives the version it replaces in the
// same one, filer.Atomically), so readers see it whole or not at all.
package objectapi
