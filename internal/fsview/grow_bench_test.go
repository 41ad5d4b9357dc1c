package fsview

import "testing"

// BenchmarkBufferFile1MiB buffers a file of 1 MiB written in pieces of
// 128 KiB (cp and cat write st_blksize at a time) into its first block, as
// file.write does: the block's growth is the copying beyond the writes'.
func BenchmarkBufferFile1MiB(b *testing.B) {
	const bs, piece, size = 8 << 20, 128 << 10, 1 << 20
	src := make([]byte, piece)
	b.SetBytes(size)
	for b.Loop() {
		var data []byte
		for off := int64(0); off < size; off += piece {
			data = growBlock(data, off+piece, bs, piece, true)
			copy(data[off:], src)
		}
		putBuf(data)
	}
}
