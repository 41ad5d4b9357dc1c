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
// Multipart uploads live under Root + "/.uploads/<bucket>/<upload id>": the
// upload directory carries the future object's metadata, each part is a
// file named by its five-digit number whose chunks are kept in the xattr
// s3.chunks (not in the entry's chunk list, so that removing the part entry
// does not garbage-collect them). Completion creates the object entry from
// the parts' chunks with shifted offsets, no data is copied, and then
// deletes the upload directory; the blobs of parts left out of the object
// (and of aborted uploads) are deleted through the blob layer directly.
// Bucket names cannot start with '.', so ".uploads" never shows as a bucket.
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
// version, so ListObjectVersions walks the bucket as ListObjects does
// (delete markers included) and reads each key's versions directory.
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
//	Xattrs["s3.acl"]              canned ACL of a bucket (private, public-read, ...)
//	Xattrs["s3.cors"]             a bucket's CORS configuration (JSON, see cors.go)
//	Xattrs["s3.policy"]           a bucket's policy document (JSON as sent, checked
//	                              by ParsePolicy in policy.go)
//	Xattrs["s3.key"], ["s3.chunks"] an upload's key / a part's chunk list;
//	                              s3.key also on a key's versions directory
//	Xattrs["s3.versioning"]       a bucket's versioning state
//	Xattrs["s3.vid"]              version id (absent: "null")
//	Xattrs["s3.dm"]               "1" on a delete marker
//	Xattrs["s3.sse"]              an encrypted object's or upload's sse.Meta (JSON)
//	Xattrs["s3.ssepart"]          an encrypted upload part's sse.Part (JSON)
//	Xattrs["s3.encryption"]       a bucket's default encryption (JSON BucketEncryption)
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
// "..", a NUL byte, or a component over 255 bytes (ErrUnsupportedKey, a
// 400 InvalidArgument); and "a" cannot be an object while "a/b" is
// (ErrKeyConflict, 409) — this includes a delete marker at "a".
//
// All methods are safe for concurrent use; each write ends with one filer
// transaction (a versioned write archives the version it replaces in the
// same one, filer.Atomically), so readers see it whole or not at all.
package objectapi
