package filer

import "github.com/kelpfs/kelp/internal/chunk"

func chunkFixture() []chunk.Chunk {
	return []chunk.Chunk{
		{FID: "3,01637037d6", Offset: 0, Size: 8, Mtime: 1700000000000000000, ETag: "e1"},
		{FID: "4,1a2b3c4d5e", Offset: 8, Size: 4, Mtime: 1700000000000000009, ETag: "e2", Manifest: false},
	}
}
