// Package needle defines Kelp's on-disk binary formats for volumes: the
// superblock at the start of a .dat file, needle records, and index records.
// It owns encoding, decoding and checksums only; the volume package owns the
// files. Anyone in the data-plane core may import it; it imports only leaves.
//
// All integers are big-endian. Checksums are CRC32C (Castagnoli).
//
// # Superblock (32 bytes, offset 0 of every .dat)
//
//	0  magic "KELP"                         4 bytes
//	4  format version (1)                   u8
//	5  replication code (X*100+Y*10+Z)      u8
//	6  TTL count, TTL unit                  2 x u8
//	8  compaction revision                  u32  (bumped by every vacuum)
//	12 reserved, zero                       u32
//	16 created at, unix nanoseconds         i64
//	24 reserved, zero                       u32
//	28 CRC32C of bytes 0..27                u32
//
// # Needle record (version 1), starting at an 8-aligned offset
//
//	header (16 bytes)
//	0  cookie                               u32
//	4  key                                  u64
//	12 body size                            u32  (0 = tombstone: no body)
//	body (body size bytes)
//	0  flags                                u8   (opaque to the volume; see Flag*)
//	1  name length                          u8
//	2  mime length                          u8
//	3  TTL count, TTL unit                  2 x u8
//	5  reserved, zero                       u8
//	6  pairs length                         u16
//	8  last modified, unix seconds          i64
//	16 appended at, unix nanoseconds        i64  (set by the volume; drives TTL expiry)
//	24 data size                            u32
//	28 reserved, zero                       u32
//	32 name, mime, pairs, then data
//	trailer (8 bytes)
//	   data CRC32C (CRC of data only; the ETag)      u32
//	   record CRC32C over header, body and data CRC  u32
//	padding: zero bytes up to the next multiple of 8
//
// Body size = 32 + name + mime + pairs + data, so the record length is a
// function of the body size alone (RecordSize) and a reader holding
// (offset, body size) from the index reads a small needle with one positioned
// read. The metadata precedes the data so a large needle's metadata is one
// small read and its data can be streamed; the data CRC sits in the trailer
// because a streaming writer only knows it at the end. A tombstone is a
// header with body size 0 followed by the trailer (data CRC 0): 24 bytes.
//
// # Index record (16 bytes), appended to .idx in the order records were written
//
//	0  key                                  u64
//	8  offset of the record / 8             u32  (so a volume is at most 32 GiB)
//	12 body size                            u32  (TombstoneSize marks a delete)
//
// Decoding errors wrap ErrCorrupt (test with errors.Is); oversized inputs
// give ErrTooLarge.
package needle
