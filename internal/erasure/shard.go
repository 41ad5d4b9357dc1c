package erasure

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
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
	if off < 0 || n < 0 || off+n > s.Footer.Layout.ShardSize {
		return nil, fmt.Errorf("%w: %d+%d outside shard of %d bytes", ErrRange, off, n, s.Footer.Layout.ShardSize)
	}
	if verify && (off%BlockSize != 0 || n%BlockSize != 0) {
		return nil, fmt.Errorf("%w: verified read of %d+%d is not whole %d-byte blocks", ErrRange, off, n, BlockSize)
	}
	b := make([]byte, n)
	if _, err := s.f.ReadAt(b, off); err != nil && !(errors.Is(err, io.EOF) && n == 0) {
		return nil, fmt.Errorf("%w: shard %d: %v", ErrShardUnavailable, s.Footer.Shard, err)
	}
	if verify {
		for p := int64(0); p < n; p += BlockSize {
			blk := (off + p) / BlockSize
			if needle.CRC(b[p:p+BlockSize]) != s.table[blk] {
				return nil, fmt.Errorf("%w: shard %d block %d checksum", ErrCorrupt, s.Footer.Shard, blk)
			}
		}
	}
	return b, nil
}

// Verify reads the whole shard and checks every block.
func (s *Shard) Verify() error {
	for off := int64(0); off < s.Footer.Layout.ShardSize; off += chunkSize {
		n := min(chunkSize, s.Footer.Layout.ShardSize-off)
		if _, err := s.ReadAt(off, n, true); err != nil {
			return err
		}
	}
	return nil
}

// Close closes the file.
func (s *Shard) Close() error { return s.f.Close() }

// shardWriter writes one shard file under a temporary name.
type shardWriter struct {
	fsys  vfs.FS
	path  string
	f     vfs.File
	off   int64
	table []byte
}

func newShardWriter(fsys vfs.FS, path string) (*shardWriter, error) {
	f, err := fsys.OpenFile(path+".tmp", os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return &shardWriter{fsys: fsys, path: path, f: f}, nil
}

func (w *shardWriter) write(b []byte) error {
	for p := 0; p < len(b); p += BlockSize {
		w.table = binary.BigEndian.AppendUint32(w.table, needle.CRC(b[p:min(p+BlockSize, len(b))]))
	}
	if _, err := w.f.WriteAt(b, w.off); err != nil {
		return err
	}
	w.off += int64(len(b))
	return nil
}

// finish appends the table and footer, syncs, and renames the file into place.
func (w *shardWriter) finish(footer ShardFooter) error {
	footer.TableCRC = needle.CRC(w.table)
	tail := append(w.table, footer.marshal()...)
	if _, err := w.f.WriteAt(tail, w.off); err != nil {
		return err
	}
	if err := w.f.Sync(); err != nil {
		return err
	}
	if err := w.f.Close(); err != nil {
		return err
	}
	w.f = nil
	return w.fsys.Rename(w.path+".tmp", w.path)
}

func (w *shardWriter) abort() {
	if w.f != nil {
		w.f.Close()
	}
	w.fsys.Remove(w.path + ".tmp")
}

// produceFunc returns, for shard bytes [off, off+n), the content of each
// shard being written.
type produceFunc func(ctx context.Context, off, n int64) (map[int][]byte, error)

// writeShards writes the shards in which, chunk by chunk, then syncs them and
// their directory. On error no shard file of which is left behind.
func writeShards(ctx context.Context, fsys vfs.FS, dir, base string, volumeID uint32, l Layout, which ShardSet, produce produceFunc, progress func(done, total int64)) (err error) {
	ws := map[int]*shardWriter{}
	defer func() {
		if err != nil {
			for i, w := range ws {
				w.abort()
				fsys.Remove(filepath.Join(dir, ShardName(base, i)))
			}
		}
	}()
	for _, i := range which.List() {
		w, err := newShardWriter(fsys, filepath.Join(dir, ShardName(base, i)))
		if err != nil {
			return err
		}
		ws[i] = w
	}
	for off := int64(0); off < l.ShardSize; off += chunkSize {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(chunkSize, l.ShardSize-off)
		chunk, err := produce(ctx, off, n)
		if err != nil {
			return err
		}
		for i, w := range ws {
			if err := w.write(chunk[i]); err != nil {
				return err
			}
		}
		if progress != nil {
			progress(off+n, l.ShardSize)
		}
	}
	for i, w := range ws {
		if err := w.finish(ShardFooter{Shard: i, Scheme: l.Scheme, Layout: l, VolumeID: volumeID}); err != nil {
			return err
		}
	}
	return fsys.SyncDir(dir)
}
