// Package chunk maps a file's bytes to the blobs (needles) that hold them.
//
// It owns four things:
//
//   - the Chunk: a piece of a file stored as one blob, placed at a file
//     offset, and a list of chunks as the content of a file;
//   - visibility: chunks may overlap (a range overwrite appends a chunk over
//     older ones). A later chunk in the list shadows the ranges of earlier
//     ones, whatever their mtimes: list order is the write order because the
//     filer appends new chunks under a store transaction. Visible resolves a
//     list into non-overlapping intervals; bytes no chunk covers read as
//     zeros (sparse files);
//   - splitting: Split cuts a stream into chunks of ChunkSize bytes and
//     uploads up to Concurrency of them at once, holding at most
//     Concurrency+1 chunk buffers: memory is bounded whatever the file size;
//   - manifests: Pack replaces long runs of chunks by manifest chunks whose
//     blob is an encoded chunk list, so that a file entry stays small;
//     Resolve expands them again, in place, which keeps the shadowing order.
//
// The blob layer is the small interfaces Putter, Opener and Blobs, defined
// here and implemented by the filer over internal/client (and by a fake in
// tests). Package chunk does no network I/O of its own.
//
// Imported by internal/filer and services. Imports only the standard library.
//
// # Formats
//
// AppendList encodes a chunk list (used inside filer entries and as the blob
// of a manifest) as: version byte (1), uvarint count, then per chunk:
// uvarint len + FID bytes, varint Offset, uvarint Size, varint Mtime (unix
// ns), uvarint len + ETag bytes, flags byte (bit 0: manifest, bit 1: sealed),
// then for a sealed chunk uvarint len + its 32-byte key. A manifest blob is
// the 4 bytes "KCM1" followed by such a list (sealed itself when it lists a
// sealed chunk).
//
// # Encrypted chunks
//
// With encryption at rest a blob is stored sealed (crypt.go): AES-256-GCM
// under a random key of its own, in segments of 64 KiB of plaintext each
// followed by its tag, the segment index as nonce. The key is only in the
// chunk's record (Chunk.CipherKey). PutChunk stores a chunk sealed or not;
// OpenChunk reads any range, fetching only the segments it touches; Reader,
// ReadAt and ReadManifest open sealed chunks whatever the writer's setting.
package chunk
