package erasure

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"

	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/vfs"
)

// Encode turns a sealed volume's .dat (its first datSize bytes, read through
// dat) into k+m shard files and the index in dir, named after base. Every
// file is synced, the shards first and the index last, so a .ecx on disk
// means the shards it describes were all written. On error nothing is left.
func Encode(ctx context.Context, fsys vfs.FS, dat io.ReaderAt, datSize int64, dir, base string, volumeID uint32, s Scheme, progress func(done, total int64)) (*Index, error) {
	enc, err := encoder(s)
	if err != nil {
		return nil, err
	}
	x, err := BuildIndex(dat, datSize)
	if err != nil {
		return nil, err
	}
	l := NewLayout(s, datSize)
	x.Layout = l
	all := ShardSet(1<<s.Total() - 1)
	// The data shards' buffers are read straight from the .dat (each a
	// sequential stream through its piece), the parity ones computed from them.
	produce := func(ctx context.Context, off, n int64, shards, _ [][]byte) error {
		var wg sync.WaitGroup
		errs := make([]error, s.Data)
		for j := range s.Data {
			buf := shards[j]
			start := int64(j)*l.ShardSize + off
			m := max(min(n, datSize-start), 0)
			clear(buf[m:])
			if m == 0 {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := dat.ReadAt(buf[:m], start); err != nil && !errors.Is(err, io.EOF) {
					errs[j] = fmt.Errorf("erasure: read volume: %w", err)
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		if err := enc.Encode(shards); err != nil {
			return fmt.Errorf("erasure: encode: %w", err)
		}
		return nil
	}
	if err := writeShards(ctx, fsys, dir, base, volumeID, l, all, encodeParallel, produce, progress); err != nil {
		return nil, fmt.Errorf("erasure: encode volume %d: %w", volumeID, err)
	}
	if err := vfs.WriteFileAtomic(fsys, filepath.Join(dir, IndexName(base)), x.Marshal(), 0o644); err != nil {
		for i := range s.Total() {
			fsys.Remove(filepath.Join(dir, ShardName(base, i)))
		}
		return nil, fmt.Errorf("erasure: encode volume %d: %w", volumeID, err)
	}
	return x, nil
}

// BuildIndex scans a .dat and returns its superblock and live needles
// (the last record of each key, unless it is a delete), sorted by key.
func BuildIndex(dat io.ReaderAt, datSize int64) (*Index, error) {
	if datSize < needle.SuperblockSize {
		return nil, fmt.Errorf("%w: volume of %d bytes has no superblock", ErrCorrupt, datSize)
	}
	sb := make([]byte, needle.SuperblockSize)
	if _, err := dat.ReadAt(sb, 0); err != nil {
		return nil, fmt.Errorf("erasure: read superblock: %w", err)
	}
	if _, err := needle.ParseSuperblock(sb); err != nil {
		return nil, err
	}
	live := map[uint64]needle.IndexEntry{}
	// A small buffer, and a jump over records much larger than it: the
	// scan reads about the headers only of a volume of large needles.
	const scanBuf = 64 << 10
	r := bufio.NewReaderSize(io.NewSectionReader(dat, 0, datSize), scanBuf)
	if _, err := r.Discard(needle.SuperblockSize); err != nil {
		return nil, err
	}
	pos := int64(needle.SuperblockSize)
	hdr := make([]byte, needle.HeaderSize)
	for pos+needle.HeaderSize <= datSize {
		if _, err := io.ReadFull(r, hdr); err != nil {
			return nil, fmt.Errorf("erasure: scan volume at %d: %w", pos, err)
		}
		h, err := needle.ParseHeader(hdr)
		if err != nil {
			return nil, fmt.Errorf("erasure: scan volume at %d: %w", pos, err)
		}
		rec := needle.RecordSize(h.BodySize)
		if pos+rec > datSize {
			return nil, fmt.Errorf("%w: record at %d runs past the end of the volume", ErrCorrupt, pos)
		}
		if h.IsTombstone() {
			delete(live, h.Key)
		} else {
			live[h.Key] = needle.IndexEntry{Key: h.Key, Offset: pos, Size: h.BodySize}
		}
		if skip := rec - needle.HeaderSize; skip > int64(r.Buffered())+scanBuf {
			r.Reset(io.NewSectionReader(dat, pos+rec, datSize-(pos+rec)))
		} else if _, err := r.Discard(int(skip)); err != nil {
			return nil, fmt.Errorf("erasure: scan volume at %d: %w", pos, err)
		}
		pos += rec
	}
	x := &Index{Superblock: sb, Entries: make([]needle.IndexEntry, 0, len(live))}
	for _, e := range live {
		x.Entries = append(x.Entries, e)
	}
	slices.SortFunc(x.Entries, func(a, b needle.IndexEntry) int { return cmp.Compare(a.Key, b.Key) })
	return x, nil
}

// encodeParallel and rebuildParallel are how many stripes encode and
// rebuild produce at once: encode is CPU and local reads (two cores here),
// rebuild mostly waits for range reads from other servers.
const (
	encodeParallel  = 2
	rebuildParallel = 4
)

// Rebuild writes the shards in missing into dir, reconstructed chunk by
// chunk from k other shards read through fetch (see Reconstruct), then
// syncs them. On error nothing is left behind.
func Rebuild(ctx context.Context, fsys vfs.FS, dir, base string, volumeID uint32, l Layout, fetch Fetcher, missing ShardSet, prefer []int, progress func(done, total int64)) error {
	produce := func(ctx context.Context, off, n int64, dst, scratch [][]byte) error {
		_, _, err := reconstructInto(ctx, l.Scheme, fetch, off, n, missing, 0, prefer, dst, scratch)
		return err
	}
	if err := writeShards(ctx, fsys, dir, base, volumeID, l, missing, rebuildParallel, produce, progress); err != nil {
		return fmt.Errorf("erasure: rebuild shards %v of volume %d: %w", missing, volumeID, err)
	}
	return nil
}

// Decode writes the original .dat (datSize bytes) to w from the data
// shards, read through fetch (reconstructed where one is missing).
func Decode(ctx context.Context, l Layout, fetch Fetcher, w io.Writer, prefer []int) error {
	for off := int64(0); off < l.DatSize; off += chunkSize {
		n := min(chunkSize, l.DatSize-off)
		b, _, err := ReadRange(ctx, l, verifiedFetch(fetch), off, n, 0, prefer)
		if err != nil {
			return err
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// verifiedFetch widens every read to whole blocks and verifies them, for
// readers (Decode) that have no checksum of their own.
func verifiedFetch(fetch Fetcher) Fetcher {
	return verifying{fetch}
}

type verifying struct{ inner Fetcher }

// FetchVerified passes batches through (they are verified already).
func (v verifying) FetchVerified(ctx context.Context, shards []int, off, n int64) ([][]byte, []error) {
	return fetchVerified(ctx, v.inner, shards, off, n)
}

func (v verifying) Fetch(ctx context.Context, shard int, off, n int64, verify bool) ([]byte, error) {
	start, end := alignBlocks(off, n)
	b, err := v.inner.Fetch(ctx, shard, start, end-start, true)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) != end-start {
		return nil, fmt.Errorf("%w: shard %d returned %d bytes", ErrCorrupt, shard, len(b))
	}
	return b[off-start : off-start+n], nil
}
