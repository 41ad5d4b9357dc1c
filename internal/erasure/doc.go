// Package erasure turns a sealed volume into Reed–Solomon shards
// (github.com/klauspost/reedsolomon) and reads needles back from them,
// reconstructing around shards that are missing or corrupt.
//
// It owns the on-disk formats of an EC volume (shard files, the EC index,
// the delete journal), the stripe layout, encoding, range reconstruction,
// rebuilding and decoding. It imports needle, vfs, volume (for its error
// values and BaseName) and the leaves; store and the volume server import
// it. Nothing here speaks a network protocol: reads of shards held
// elsewhere go through a Fetch function the caller supplies.
//
// # Scheme
//
// k data + m parity shards, "k+m", 1 <= k, 1 <= m, k+m <= 32; 10+4 by
// default (1.4× the data, any 4 shards may be lost). Any k shards rebuild
// the others.
//
// # Stripe layout: one contiguous piece of the .dat per data shard
//
// The .dat (D bytes, superblock included) is cut into k consecutive pieces
// of S bytes each:
//
//	S = roundUp(ceil(D / k), B)            B = BlockSize = 4096
//	data shard j (0 <= j < k) = .dat bytes [j*S, (j+1)*S), zero-padded past D
//	parity shard k+i = RS parity of byte x of every data shard, for each x in [0, S)
//
// A .dat byte at offset o lives in data shard o / S at offset o % S. A
// needle record [o, o+n) lies in one data shard unless it crosses one of the
// k-1 boundaries j*S, so a volume of any size has at most k-1 needles split
// across two shards; every other needle — all small files, whatever the
// volume's size — is one contiguous range of one shard, read with one
// positioned read on one server and checked by the needle's own CRC.
// Padding is at most k*B + B bytes per volume (under 45 KiB at 10+4), not a
// block of 1 MiB per row, so small volumes cost what their scheme says:
// a 30 MB volume at 10+4 is 14 * S = 1.4 * D + < 64 KiB.
//
// Reconstruction works on aligned block ranges: to rebuild bytes [x, x+n)
// of shard j, the reader widens them to [x0, x1) = [floor(x/B)*B,
// ceil((x+n)/B)*B), reads that same range from k other shards (verified
// against their block checksums), and decodes shard j's range only
// (reedsolomon ReconstructSome). A degraded 4 KiB read thus moves k times
// 4-8 KiB, never a whole shard.
//
// # Files, in a disk directory, base = "<collection>_<id>" or "<id>"
//
//	base.ecNN  shard NN (two digits): S data bytes, then the block checksum
//	           table (CRC32C of each B-byte block, u32 each, S/B entries),
//	           then a 40-byte footer:
//	             0 "KECS"  4 version u8 (1)  5 shard u8  6 k u8  7 m u8
//	             8 S u64  16 D u64  24 volume id u32  28 CRC32C of the table u32
//	             32 reserved u32  36 CRC32C of bytes 0..35 u32
//	base.ecx   the EC index: 64-byte header
//	             0 "KECX"  4 version u8  5 k u8  6 m u8  7 reserved u8
//	             8 D u64  16 S u64  24 N u64  32 the volume's 32-byte superblock
//	           then N 16-byte needle index records (needle package format)
//	           of the live needles, sorted by key, offsets in the .dat;
//	           then CRC32C of everything before, u32.
//	base.ecj   the delete journal: 12-byte records, key u64 + CRC32C of the
//	           key u32, appended and synced before a delete is answered.
//	           A torn tail (a crash mid-append) is cut off on open.
//
// Every server that holds at least one shard of a volume keeps the .ecx and
// the .ecj, so it can answer any read of the volume by itself: it finds the
// needle, reads the range from its own shard or fetches it from the holder.
// That costs 16 bytes per live needle per holder (for 4 KiB files 0.4 % of
// the data per holder); splitting the index by shard would save that but
// would make a read need a second lookup before it knows where to go.
//
// # Writes, crash safety
//
// Encode writes every shard to "<name>.tmp", syncs and renames it, syncs
// the directory, and writes the .ecx last (atomically): an .ecx on disk
// means its shards were complete. OpenVolume removes leftover .tmp files.
// Rebuild writes reconstructed shards the same way. Deletes append to the
// .ecj; a needle in the journal reads as volume.ErrDeleted.
package erasure
