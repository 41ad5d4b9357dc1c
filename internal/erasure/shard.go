package erasure

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/vfs"
)

// File names of an EC volume "<base>" (base as volume.BaseName) in a disk directory.
func ShardName(base string, shard int) string { return fmt.Sprintf("%s.ec%02d", base, shard) }
func IndexName(base string) string            { return base + ".ecx" }
func JournalName(base string) string          { return base + ".ecj" }

// ParseShardName splits "<base>.ecNN" into base and shard index.
func ParseShardName(name string) (base string, shard int, ok bool) {
	i := strings.LastIndex(name, ".ec")
	if i <= 0 || len(name) != i+5 {
		return "", 0, false
	}
	n, err := strconv.Atoi(name[i+3:])
	if err != nil || n < 0 || n >= MaxShards {
		return "", 0, false
	}
	return name[:i], n, true
}

// chunkSize is how much of each shard encode and rebuild handle at a time.
const chunkSize = 1 << 20

// Shard is one open shard file.
type Shard struct {
	f      vfs.File
	Footer ShardFooter
	table  []uint32 // CRC32C of each block
}

// OpenShard opens a shard file and checks its footer and checksum table
// (not its data: see Verify).
func OpenShard(fsys vfs.FS, path string) (*Shard, error) {
	f, err := vfs.Open(fsys, path)
	if err != nil {
		return nil, err
	}
	s, err := loadShard(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("shard %s: %w", filepath.Base(path), err)
	}
	return s, nil
}

func loadShard(f vfs.File) (*Shard, error) {
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size < shardFooterSize {
		return nil, fmt.Errorf("%w: %d-byte shard file", ErrCorrupt, size)
	}
	fb := make([]byte, shardFooterSize)
	if _, err := f.ReadAt(fb, size-shardFooterSize); err != nil {
		return nil, err
	}
	footer, err := parseShardFooter(fb)
	if err != nil {
		return nil, err
	}
	if size != ShardFileSize(footer.Layout) {
		return nil, fmt.Errorf("%w: shard file of %d bytes, want %d", ErrCorrupt, size, ShardFileSize(footer.Layout))
	}
	tb := make([]byte, 4*footer.Layout.Blocks())
	if _, err := f.ReadAt(tb, footer.Layout.ShardSize); err != nil {
		return nil, err
	}
	if needle.CRC(tb) != footer.TableCRC {
		return nil, fmt.Errorf("%w: shard checksum table", ErrCorrupt)
	}
	table := make([]uint32, len(tb)/4)
	for i := range table {
		table[i] = binary.BigEndian.Uint32(tb[4*i:])
	}
	return &Shard{f: f, Footer: footer, table: table}, nil
}

// ReadAt reads [off, off+n) of the shard's data. With verify, off and n
// must be whole blocks, and each block is checked against its checksum.
func (s *Shard) ReadAt(off, n int64, verify bool) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: %d+%d outside shard of %d bytes", ErrRange, off, n, s.Footer.Layout.ShardSize)
	}
	b := make([]byte, n)
	if err := s.ReadInto(b, off, verify); err != nil {
		return nil, err
	}
	return b, nil
}

// ReadInto is ReadAt into b (n = len(b)), for callers that reuse buffers.
func (s *Shard) ReadInto(b []byte, off int64, verify bool) error {
	n := int64(len(b))
	if off < 0 || off+n > s.Footer.Layout.ShardSize {
		return fmt.Errorf("%w: %d+%d outside shard of %d bytes", ErrRange, off, n, s.Footer.Layout.ShardSize)
	}
	if verify && (off%BlockSize != 0 || n%BlockSize != 0) {
		return fmt.Errorf("%w: verified read of %d+%d is not whole %d-byte blocks", ErrRange, off, n, BlockSize)
	}
	if _, err := s.f.ReadAt(b, off); err != nil && !(errors.Is(err, io.EOF) && n == 0) {
		return fmt.Errorf("%w: shard %d: %v", ErrShardUnavailable, s.Footer.Shard, err)
	}
	if verify {
		for p := int64(0); p < n; p += BlockSize {
			blk := (off + p) / BlockSize
			if needle.CRC(b[p:p+BlockSize]) != s.table[blk] {
				return fmt.Errorf("%w: shard %d block %d checksum", ErrCorrupt, s.Footer.Shard, blk)
			}
		}
	}
	return nil
}

// Verify reads the whole shard and checks every block.
func (s *Shard) Verify() error {
	buf := make([]byte, min(chunkSize, s.Footer.Layout.ShardSize))
	for off := int64(0); off < s.Footer.Layout.ShardSize; off += chunkSize {
		n := min(chunkSize, s.Footer.Layout.ShardSize-off)
		if err := s.ReadInto(buf[:n], off, true); err != nil {
			return err
		}
	}
	return nil
}

// Close closes the file.
func (s *Shard) Close() error { return s.f.Close() }
