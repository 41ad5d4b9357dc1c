package volume

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/vfs"
)

// Checkpoint file (.ckp), 40 bytes, replaced atomically (tmp, fsync, rename,
// fsync dir):
//
//	0  magic "KCKP"                   4 bytes
//	4  version (1)                    u32
//	8  compaction revision            u32
//	12 reserved                       u32
//	16 index entries valid            u64  (N)
//	24 .dat verified up to            u64  (D)
//	32 CRC32C of the first N*16 bytes of the .idx   u32
//	36 CRC32C of bytes 0..35          u32
const ckpSize = 40

var ckpMagic = [4]byte{'K', 'C', 'K', 'P'}

type checkpointRec struct {
	revision uint32
	entries  int64
	datEnd   int64
	idxCRC   uint32
}

func (c checkpointRec) marshal() []byte {
	b := append(make([]byte, 0, ckpSize), ckpMagic[:]...)
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint32(b, c.revision)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(c.entries))
	b = binary.BigEndian.AppendUint64(b, uint64(c.datEnd))
	b = binary.BigEndian.AppendUint32(b, c.idxCRC)
	return binary.BigEndian.AppendUint32(b, needle.CRC(b))
}

func parseCheckpoint(b []byte) (checkpointRec, error) {
	if len(b) != ckpSize || [4]byte(b[:4]) != ckpMagic || binary.BigEndian.Uint32(b[4:]) != 1 ||
		needle.CRC(b[:36]) != binary.BigEndian.Uint32(b[36:]) {
		return checkpointRec{}, fmt.Errorf("%w: bad checkpoint", needle.ErrCorrupt)
	}
	return checkpointRec{
		revision: binary.BigEndian.Uint32(b[8:]),
		entries:  int64(binary.BigEndian.Uint64(b[16:])),
		datEnd:   int64(binary.BigEndian.Uint64(b[24:])),
		idxCRC:   binary.BigEndian.Uint32(b[32:]),
	}, nil
}

func readFull(f vfs.File, buf []byte, off int64) error {
	n, err := f.ReadAt(buf, off)
	if n == len(buf) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = fmt.Errorf("%w: short read at %d", needle.ErrCorrupt, off)
	}
	return err
}

// flushIndex writes buffered index records to the .idx. appendMu held.
func (v *Volume) flushIndex() error {
	v.mu.RLock()
	buf, f, at := v.idxBuf, v.idxFile, v.idxFlushed
	v.mu.RUnlock()
	if len(buf) == 0 {
		return nil
	}
	if _, err := f.WriteAt(buf, at*needle.IndexEntrySize); err != nil {
		return err
	}
	v.mu.Lock()
	v.idxCRC = needle.UpdateCRC(v.idxCRC, buf)
	v.idxFlushed += int64(len(buf) / needle.IndexEntrySize)
	v.idxBuf = v.idxBuf[:0]
	v.mu.Unlock()
	return nil
}

// checkpoint makes the index durable and records how far it and the .dat
// are known good, so Open need only re-scan the .dat after that point.
func (v *Volume) checkpoint() error {
	v.appendMu.Lock()
	defer v.appendMu.Unlock()
	v.mu.RLock()
	closed := v.closed
	v.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	return v.checkpointLocked()
}

func (v *Volume) checkpointLocked() error {
	v.ckpDirty.Store(false)
	// After a failed fsync the .dat's content on disk is unknown, and a
	// later fsync that succeeds does not say otherwise: vouch for nothing,
	// so that Open re-scans from the last good checkpoint.
	if err := v.syncer.failure(); err != nil {
		return fmt.Errorf("%w: no checkpoint after a failed fsync: %w", ErrBroken, err)
	}
	if err := v.flushIndex(); err != nil {
		return err
	}
	v.mu.RLock()
	d, idx, seq := v.dat, v.idxFile, v.seq
	c := checkpointRec{revision: v.sb.CompactionRevision, entries: v.idxFlushed, datEnd: v.tail, idxCRC: v.idxCRC}
	v.mu.RUnlock()
	if err := idx.Sync(); err != nil {
		return err
	}
	err := d.f.Sync()
	v.syncer.done(seq, err)
	if err != nil {
		v.markBroken(err)
		return err
	}
	return vfs.WriteFileAtomic(v.cfg.FS, v.base+".ckp", c.marshal(), 0o644)
}

// Open loads an existing volume and recovers it from any crash: the index
// is trusted up to the last checkpoint and the .dat is re-scanned from there,
// record by record with CRC checks; the first bad or torn record and
// everything after it are cut off. A missing, short or inconsistent index or
// checkpoint means a full re-scan.
func Open(cfg Config) (*Volume, error) {
	v := newVolume(cfg)
	for _, ext := range []string{".cpd", ".cpx", ".ckp.tmp"} {
		if err := cfg.FS.Remove(v.base + ext); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("volume %d: open: %w", cfg.ID, err)
		}
	}
	f, err := cfg.FS.OpenFile(v.base+".dat", os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("volume %d: open: %w", cfg.ID, err)
	}
	v.dat = &datFile{f: f}
	v.dat.refs.Store(1)
	if _, err := cfg.FS.Stat(v.base + ".ro"); err == nil {
		v.readOnly = true
	}
	if err := v.load(); err != nil {
		f.Close()
		if v.idxFile != nil {
			v.idxFile.Close()
		}
		return nil, fmt.Errorf("volume %d: open: %w", cfg.ID, noSpace(err))
	}
	v.start()
	return v, nil
}

func (v *Volume) load() error {
	f := v.dat.f
	sbuf := make([]byte, needle.SuperblockSize)
	if err := readFull(f, sbuf, 0); err != nil {
		return fmt.Errorf("superblock: %w", err)
	}
	sb, err := needle.ParseSuperblock(sbuf)
	if err != nil {
		return err
	}
	v.sb = sb
	datSize, err := f.Size()
	if err != nil {
		return err
	}
	if v.idxFile, err = v.cfg.FS.OpenFile(v.base+".idx", os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		return err
	}
	start := int64(needle.SuperblockSize)
	if ck, ok := v.loadCheckpointed(datSize); ok {
		start = ck.datEnd
	} else {
		v.log.Info("rebuilding index from the .dat")
		v.idx, v.counts, v.idxFlushed, v.idxCRC = newNeedleIndex(), counters{}, 0, 0
	}
	// Entries past the checkpoint may describe records that did not survive;
	// the scan below re-creates the ones that did.
	if err := v.idxFile.Truncate(v.idxFlushed * needle.IndexEntrySize); err != nil {
		return err
	}
	end, err := scanRecords(f, start, datSize, func(off int64, h needle.Header, _ []byte) error {
		size := h.BodySize
		if h.IsTombstone() {
			size = needle.TombstoneSize
		}
		e := indexEntry{off: uint32(off / needle.Align), size: size}
		old, existed := v.idx.set(h.Key, e)
		v.counts.apply(old, existed, e)
		v.idxBuf = needle.AppendIndex(v.idxBuf, needle.IndexEntry{Key: h.Key, Offset: off, Size: size})
		return nil
	})
	if err != nil {
		return err
	}
	if end < datSize {
		v.log.Warn("cutting off torn or corrupt tail of .dat", "offset", end, "dropped", datSize-end)
		if err := f.Truncate(end); err != nil {
			return err
		}
	}
	v.tail = end
	v.modifiedAt = v.cfg.Now()
	if st, err := v.cfg.FS.Stat(v.base + ".dat"); err == nil {
		v.modifiedAt = st.ModTime()
	}
	return v.checkpointLocked()
}

// loadCheckpointed loads the index entries the checkpoint vouches for.
func (v *Volume) loadCheckpointed(datSize int64) (checkpointRec, bool) {
	b, err := vfs.ReadFile(v.cfg.FS, v.base+".ckp")
	if err != nil {
		return checkpointRec{}, false
	}
	ck, err := parseCheckpoint(b)
	if err != nil || ck.revision != v.sb.CompactionRevision || ck.datEnd < needle.SuperblockSize ||
		ck.datEnd > datSize || ck.datEnd%needle.Align != 0 || ck.entries < 0 || ck.entries > ck.datEnd/needle.RecordSize(0) {
		return ck, false
	}
	raw := make([]byte, ck.entries*needle.IndexEntrySize)
	if err := readFull(v.idxFile, raw, 0); err != nil || needle.CRC(raw) != ck.idxCRC {
		return ck, false
	}
	for i := 0; i < len(raw); i += needle.IndexEntrySize {
		ie, err := needle.ParseIndex(raw[i:])
		if err != nil || ie.Offset+needle.RecordSize(sizeOnDisk(ie.Size)) > ck.datEnd {
			v.idx, v.counts = newNeedleIndex(), counters{}
			return ck, false
		}
		e := indexEntry{off: uint32(ie.Offset / needle.Align), size: ie.Size}
		old, existed := v.idx.set(ie.Key, e)
		v.counts.apply(old, existed, e)
	}
	v.idxFlushed, v.idxCRC = ck.entries, ck.idxCRC
	return ck, true
}

// scanBuf is the read size of a sequential scan.
const scanBuf = 1 << 20

// scanRecords reads records sequentially from start to end, verifying each
// CRC, and calls fn with each record's offset, header and, for records of at
// most scanBuf bytes, its bytes (nil for larger ones, whose checksum is
// verified by streaming). It returns the offset after the last good record.
func scanRecords(f vfs.File, start, end int64, fn func(off int64, h needle.Header, rec []byte) error) (int64, error) {
	buf := make([]byte, scanBuf)
	var bufOff, bufLen int64 // buf holds file bytes [bufOff, bufOff+bufLen)
	window := func(off, n int64) ([]byte, error) {
		if off >= bufOff && off+n <= bufOff+bufLen {
			return buf[off-bufOff : off-bufOff+n], nil
		}
		want := min(int64(len(buf)), end-off)
		if err := readFull(f, buf[:want], off); err != nil {
			return nil, err
		}
		bufOff, bufLen = off, want
		return buf[:n], nil
	}
	off := start
	for off+needle.RecordSize(0) <= end {
		hb, err := window(off, needle.HeaderSize)
		if err != nil {
			return off, err
		}
		h, err := needle.ParseHeader(hb)
		if err != nil {
			return off, nil
		}
		n := needle.RecordSize(h.BodySize)
		if off+n > end {
			return off, nil
		}
		var rec []byte
		if n <= scanBuf {
			if rec, err = window(off, n); err != nil {
				return off, err
			}
			if _, err := needle.ParseRecord(rec); err != nil {
				return off, nil
			}
		} else if ok, err := verifyStreaming(f, off, h); err != nil || !ok {
			return off, err
		}
		if err := fn(off, h, rec); err != nil {
			return off, err
		}
		off += n
	}
	return off, nil
}

// verifyStreaming checks a large record's CRC without holding it in memory.
func verifyStreaming(f vfs.File, off int64, h needle.Header) (bool, error) {
	bodyEnd := off + needle.HeaderSize + int64(h.BodySize)
	buf := make([]byte, streamChunk)
	var crc uint32
	for pos := off; pos < bodyEnd; {
		chunk := buf[:min(int64(len(buf)), bodyEnd-pos)]
		if err := readFull(f, chunk, pos); err != nil {
			return false, err
		}
		crc = needle.UpdateCRC(crc, chunk)
		pos += int64(len(chunk))
	}
	var tr [needle.TrailerSize]byte
	if err := readFull(f, tr[:], bodyEnd); err != nil {
		return false, err
	}
	_, want := needle.ParseTrailer(tr[:])
	return needle.UpdateCRC(crc, tr[:4]) == want, nil
}
