// Package sse is the on-disk format of Kelp's server-side encryption: how
// an object's content is encrypted before it is cut into chunks, and what
// is recorded next to it so that it can be decrypted (Meta).
//
// It is a core package: pure crypto and arithmetic, no network, no keys of
// its own. Who holds the key encryption keys (the customer for SSE-C,
// internal/kms for SSE-S3 and SSE-KMS) is the gateway's business; this
// package only seals a data key under a key it is given.
//
// # Format (version 1)
//
// Every object (and every part of a multipart object) has a random 256-bit
// data key (DEK) per object or upload, and per part a random 96-bit nonce
// base. The plaintext of a part is cut into segments of SegmentSize bytes
// (64 KiB; the last one shorter, an empty part has one empty segment), each
// sealed with AES-256-GCM:
//
//	nonce(part, i) = base[0:4] || (base[4:12] XOR big-endian uint64(i))
//	aad(part, i)   = "kelp-sse1" || uint32(part number) || uint64(i) || final
//
// where final is 1 for the part's last segment and 0 otherwise. The
// ciphertext of a segment is its plaintext followed by the 16-byte tag, so
// a part of n plaintext bytes takes CipherSize(n) bytes and a plaintext
// offset maps to a ciphertext offset by arithmetic alone: a range read
// fetches and opens only the segments it overlaps. Segment indexes and part
// numbers in the AAD make swapped, repeated or moved segments fail
// authentication; the final flag makes a truncated part fail too. A part
// uploaded again gets a new nonce base, so no (key, nonce) pair is ever
// used for two plaintexts.
//
// The DEK is stored only sealed (SealKey: AES-256-GCM under a key
// encryption key, random nonce prepended, caller-chosen AAD). For SSE-C the
// key encryption key is the customer's key, and Meta also keeps
// HMAC-SHA256(salt, key) with a random salt so that a wrong key is refused
// with a clear error before any data is read; the customer key itself is
// never stored.
//
// Meta is stored as JSON (Marshal / Parse) in the object's xattr s3.sse;
// each part of an unfinished upload keeps its own Part in s3.ssepart.
package sse
