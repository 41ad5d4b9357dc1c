package volume

import (
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/vfs"
)

// catchUpRounds bounds the unlocked catch-up passes before the final,
// locked one; each pass copies what was appended during the previous one.
const catchUpRounds = 3

// compactor writes the compacted copy of a volume into .cpd and .cpx.
type compactor struct {
	v      *Volume
	old    *datFile
	dat    vfs.File
	idx    *needleIndex
	counts counters
	idxBuf []byte
	tail   int64
	buf    []byte
}

// Vacuum rewrites the volume without deleted, overwritten and expired
// needles while reads and writes go on: it copies the live needles into new
// files, catches up with what was appended meanwhile, then, holding the append
// lock only for the last catch-up, makes the new files durable and renames the
// new .dat over the old one (the commit point) and bumps the compaction
// revision. A crash at any point leaves either the old volume or the new one.
// Objects opened before the switch keep reading the old file.
func (v *Volume) Vacuum(ctx context.Context) error {
	v.mu.Lock()
	if v.closed || v.broken != nil {
		err := v.writableLocked()
		v.mu.Unlock()
		return fmt.Errorf("volume %d: vacuum: %w", v.cfg.ID, err)
	}
	if v.vacuuming {
		v.mu.Unlock()
		return fmt.Errorf("volume %d: %w", v.cfg.ID, ErrVacuumRunning)
	}
	v.vacuuming = true
	old := v.dat.acquire()
	from := v.tail
	sb := v.sb
	type live struct {
		key uint64
		e   indexEntry
	}
	var entries []live
	v.idx.ascend(func(k uint64, e indexEntry) bool {
		if e.size != needle.TombstoneSize {
			entries = append(entries, live{k, e})
		}
		return true
	})
	v.mu.Unlock()
	defer func() {
		v.mu.Lock()
		v.vacuuming = false
		v.mu.Unlock()
		old.release()
	}()
	// Copy in file order: sequential reads of the old file.
	slices.SortFunc(entries, func(a, b live) int { return int(a.e.off) - int(b.e.off) })

	f, err := v.cfg.FS.OpenFile(v.base+".cpd", os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("volume %d: vacuum: %w", v.cfg.ID, noSpace(err))
	}
	c := &compactor{v: v, old: old, dat: f, idx: newNeedleIndex(), tail: needle.SuperblockSize, buf: make([]byte, scanBuf)}
	committed := false
	defer func() {
		if !committed {
			f.Close()
			v.cfg.FS.Remove(v.base + ".cpd")
			v.cfg.FS.Remove(v.base + ".cpx")
		}
	}()
	sb.CompactionRevision++
	if _, err := f.WriteAt(sb.Marshal(), 0); err != nil {
		return fmt.Errorf("volume %d: vacuum: %w", v.cfg.ID, noSpace(err))
	}
	for i, le := range entries {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if err := c.copyLive(le.key, le.e, sb); err != nil {
			return fmt.Errorf("volume %d: vacuum: %w", v.cfg.ID, noSpace(err))
		}
	}
	for range catchUpRounds {
		v.mu.RLock()
		to := v.tail
		v.mu.RUnlock()
		if to-from < scanBuf {
			break
		}
		if err := c.catchUp(from, to); err != nil {
			return fmt.Errorf("volume %d: vacuum: %w", v.cfg.ID, noSpace(err))
		}
		from = to
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	committed, err = c.switchOver(from, sb)
	if err != nil {
		return fmt.Errorf("volume %d: vacuum: %w", v.cfg.ID, noSpace(err))
	}
	return nil
}

func (c *compactor) put(key uint64, e indexEntry, rec []byte) {
	old, existed := c.idx.set(key, e)
	c.counts.apply(old, existed, e)
	c.idxBuf = needle.AppendIndex(c.idxBuf, needle.IndexEntry{Key: key, Offset: int64(e.off) * needle.Align, Size: e.size})
}

// copyLive copies one live needle unless it has expired.
func (c *compactor) copyLive(key uint64, e indexEntry, sb needle.Superblock) error {
	off := int64(e.off) * needle.Align
	n := needle.RecordSize(e.size)
	head := c.buf[:min(n, largeHeadRead)]
	if n <= scanBuf {
		head = c.buf[:n]
	}
	if err := readFull(c.old.f, head, off); err != nil {
		return err
	}
	m, h, _, _, need, err := needle.ParseMeta(head)
	if err == nil && need > len(head) {
		head = c.buf[:need]
		if err := readFull(c.old.f, head, off); err != nil {
			return err
		}
		m, h, _, _, _, err = needle.ParseMeta(head)
	}
	if err != nil || h.Key != key {
		return fmt.Errorf("needle %x at %d: %w", key, off, needle.ErrCorrupt)
	}
	if c.v.expired(&m, sb.TTL) {
		return nil
	}
	return c.copyRecord(key, off, h)
}

// copyRecord appends the record at off of the old file to the new one,
// verifying its checksum on the way.
func (c *compactor) copyRecord(key uint64, off int64, h needle.Header) error {
	n := needle.RecordSize(h.BodySize)
	dst := c.tail
	if n <= scanBuf {
		rec := c.buf[:n]
		if err := readFull(c.old.f, rec, off); err != nil {
			return err
		}
		if _, err := needle.ParseRecord(rec); err != nil {
			return err
		}
		if _, err := c.dat.WriteAt(rec, dst); err != nil {
			return err
		}
	} else {
		// Stream header and body, then check the trailer read on its own.
		bodyEnd := needle.HeaderSize + int64(h.BodySize)
		var crc uint32
		for pos := int64(0); pos < bodyEnd; {
			chunk := c.buf[:min(int64(len(c.buf)), bodyEnd-pos)]
			if err := readFull(c.old.f, chunk, off+pos); err != nil {
				return err
			}
			crc = needle.UpdateCRC(crc, chunk)
			if _, err := c.dat.WriteAt(chunk, dst+pos); err != nil {
				return err
			}
			pos += int64(len(chunk))
		}
		tail := c.buf[:n-bodyEnd]
		if err := readFull(c.old.f, tail, off+bodyEnd); err != nil {
			return err
		}
		if _, want := needle.ParseTrailer(tail); needle.UpdateCRC(crc, tail[:4]) != want {
			return fmt.Errorf("needle %x at %d: %w", key, off, needle.ErrCorrupt)
		}
		if _, err := c.dat.WriteAt(tail, dst+bodyEnd); err != nil {
			return err
		}
	}
	size := h.BodySize
	if h.IsTombstone() {
		size = needle.TombstoneSize
	}
	c.put(key, indexEntry{off: uint32(dst / needle.Align), size: size}, nil)
	c.tail += n
	return nil
}

// catchUp copies the records appended to the old file in [from, to).
func (c *compactor) catchUp(from, to int64) error {
	end, err := scanRecords(c.old.f, from, to, func(off int64, h needle.Header, _ []byte) error {
		if h.IsTombstone() {
			if e, ok := c.idx.get(h.Key); !ok || e.size == needle.TombstoneSize {
				return nil // nothing to delete in the new file
			}
		}
		return c.copyRecord(h.Key, off, h)
	})
	if err == nil && end != to {
		err = fmt.Errorf("catching up: record at %d: %w", end, needle.ErrCorrupt)
	}
	return err
}

// switchOver runs the last catch-up and swaps the files under the append
// lock. It reports whether the new .dat was committed (renamed into place).
func (c *compactor) switchOver(from int64, sb needle.Superblock) (bool, error) {
	v := c.v
	v.appendMu.Lock()
	defer v.appendMu.Unlock()
	v.mu.RLock()
	to, closed := v.tail, v.closed
	v.mu.RUnlock()
	if closed {
		return false, ErrClosed
	}
	if err := c.catchUp(from, to); err != nil {
		return false, err
	}
	if err := c.dat.Sync(); err != nil {
		return false, err
	}
	idxF, err := v.cfg.FS.OpenFile(v.base+".cpx", os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return false, err
	}
	if _, err := idxF.WriteAt(c.idxBuf, 0); err != nil {
		idxF.Close()
		return false, err
	}
	if err := idxF.Sync(); err != nil {
		idxF.Close()
		return false, err
	}
	if err := v.cfg.FS.Rename(v.base+".cpd", v.base+".dat"); err != nil {
		idxF.Close()
		return false, err
	}
	// Committed: from here on the new file is the volume, whatever fails.
	dirErr := v.cfg.FS.SyncDir(v.cfg.Dir)
	nd := &datFile{f: c.dat}
	nd.refs.Store(1)
	v.mu.Lock()
	oldDat, oldIdx := v.dat, v.idxFile
	v.dat, v.idxFile, v.idx = nd, idxF, c.idx
	v.idxBuf, v.idxFlushed, v.idxCRC = nil, int64(len(c.idxBuf)/needle.IndexEntrySize), needle.CRC(c.idxBuf)
	v.tail, v.sb, v.counts = c.tail, sb, c.counts
	v.full = false
	seq := v.seq
	v.mu.Unlock()
	oldDat.release()
	oldIdx.Close()
	if dirErr != nil {
		v.markBroken(fmt.Errorf("vacuum: sync dir: %w", dirErr))
		return true, dirErr
	}
	// Every append so far is in the new file, which is synced and in place.
	v.syncer.done(seq, nil)
	v.ckpDirty.Store(true)
	if err := v.cfg.FS.Rename(v.base+".cpx", v.base+".idx"); err != nil {
		v.log.Warn("vacuum: installing index failed; it will be rebuilt on open", "err", err)
		return true, nil
	}
	if err := v.checkpointLocked(); err != nil {
		v.log.Warn("vacuum: checkpoint failed; the index will be rebuilt on open", "err", err)
	}
	v.log.Info("vacuumed", "revision", sb.CompactionRevision, "size", c.tail)
	return true, nil
}
