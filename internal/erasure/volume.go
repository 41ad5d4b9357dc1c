package erasure

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/ttl"
	"github.com/kelpfs/kelp/internal/vfs"
	"github.com/kelpfs/kelp/internal/volume"
)

// Volume is one server's part of an EC volume: its index, delete journal
// and whichever shards it holds. Safe for concurrent use.
type Volume struct {
	fsys       vfs.FS
	dir, base  string
	ID         uint32
	Collection string
	Index      *Index
	sb         needle.Superblock

	routes []byte // AppendRoutes(Index.Routes()), computed once

	mu      sync.RWMutex
	shards  map[int]*Shard
	deleted map[uint64]struct{}
	journal vfs.File
	jsize   int64
	closed  bool
	sealed  bool // see Seal
}

// OpenVolume loads the EC volume "<collection>_<id>" from dir: the .ecx
// (required), the .ecj (created when missing; a torn tail is cut off) and
// every shard file present. Leftover ".tmp" files of an interrupted encode
// or rebuild are removed.
func OpenVolume(fsys vfs.FS, dir, collection string, id uint32) (*Volume, error) {
	base := volume.BaseName(collection, id)
	raw, err := vfs.ReadFile(fsys, filepath.Join(dir, IndexName(base)))
	if err != nil {
		return nil, fmt.Errorf("erasure: volume %d: %w", id, err)
	}
	x, err := ParseIndex(raw)
	if err != nil {
		return nil, fmt.Errorf("erasure: volume %d: %w", id, err)
	}
	sb, err := needle.ParseSuperblock(x.Superblock)
	if err != nil {
		return nil, fmt.Errorf("erasure: volume %d: %w", id, err)
	}
	v := &Volume{fsys: fsys, dir: dir, base: base, ID: id, Collection: collection, Index: x, sb: sb,
		shards: map[int]*Shard{}, deleted: map[uint64]struct{}{}}
	v.routes = AppendRoutes(nil, x.Routes())
	if err := v.openJournal(); err != nil {
		return nil, err
	}
	names, err := fsys.ReadDir(dir)
	if err != nil {
		v.Close()
		return nil, err
	}
	for _, name := range names {
		b, i, ok := ParseShardName(name)
		if ok && b == base {
			if err := v.loadShard(i); err != nil {
				v.Close()
				return nil, err
			}
		}
		if len(name) > len(base)+4 && name[:len(base)+3] == base+".ec" && filepath.Ext(name) == ".tmp" {
			fsys.Remove(filepath.Join(dir, name))
		}
	}
	return v, nil
}

func (v *Volume) openJournal() error {
	path := filepath.Join(v.dir, JournalName(v.base))
	f, err := v.fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("erasure: volume %d journal: %w", v.ID, err)
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return err
	}
	b := make([]byte, size)
	if size > 0 {
		if _, err := f.ReadAt(b, 0); err != nil {
			f.Close()
			return fmt.Errorf("erasure: volume %d journal: %w", v.ID, err)
		}
	}
	keys, valid := ParseJournal(b)
	if int64(valid) != size {
		if err := f.Truncate(int64(valid)); err != nil {
			f.Close()
			return err
		}
	}
	for _, k := range keys {
		v.deleted[k] = struct{}{}
	}
	v.journal, v.jsize = f, int64(valid)
	return nil
}

func (v *Volume) loadShard(i int) error {
	s, err := OpenShard(v.fsys, filepath.Join(v.dir, ShardName(v.base, i)))
	if err != nil {
		return fmt.Errorf("erasure: volume %d: %w", v.ID, err)
	}
	if s.Footer.Shard != i || s.Footer.Layout != v.Index.Layout || s.Footer.VolumeID != v.ID {
		s.Close()
		return fmt.Errorf("erasure: volume %d: shard file %d does not belong to this volume", v.ID, i)
	}
	v.mu.Lock()
	if old := v.shards[i]; old != nil {
		old.Close()
	}
	v.shards[i] = s
	v.mu.Unlock()
	return nil
}

// EncodedRoutes is the volume's route table (see Index.Routes), encoded;
// empty when the volume has none.
func (v *Volume) EncodedRoutes() []byte { return v.routes }

// Base is the file name stem of the volume.
func (v *Volume) Base() string { return v.base }

// Dir is the directory holding the volume's files.
func (v *Volume) Dir() string { return v.dir }

// Layout is the volume's stripe layout.
func (v *Volume) Layout() Layout { return v.Index.Layout }

// Superblock is the original volume's superblock.
func (v *Volume) Superblock() needle.Superblock { return v.sb }

// Shards is the set of shards held here.
func (v *Volume) Shards() ShardSet {
	v.mu.RLock()
	defer v.mu.RUnlock()
	var s ShardSet
	for i := range v.shards {
		s = s.With(i)
	}
	return s
}

// HasShard reports whether shard i is held here.
func (v *Volume) HasShard(i int) bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.shards[i] != nil
}

// ShardBytes is the disk space of the shard files held here.
func (v *Volume) ShardBytes() int64 {
	return int64(v.Shards().Count()) * ShardFileSize(v.Index.Layout)
}

// Mount opens shard files already placed in the volume's directory.
func (v *Volume) Mount(shards ShardSet) error {
	for _, i := range shards.List() {
		if err := v.loadShard(i); err != nil {
			return err
		}
	}
	return nil
}

// Unmount closes shards and, with remove, deletes their files.
func (v *Volume) Unmount(shards ShardSet, remove bool) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	var errs []error
	for _, i := range shards.List() {
		if s := v.shards[i]; s != nil {
			s.Close()
			delete(v.shards, i)
		}
		if remove {
			if err := v.fsys.Remove(filepath.Join(v.dir, ShardName(v.base, i))); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if remove {
		errs = append(errs, v.fsys.SyncDir(v.dir))
	}
	return errors.Join(errs...)
}

// ReadLocal reads a range of a shard held here (see Shard.ReadAt); a shard
// not held here is ErrShardUnavailable.
func (v *Volume) ReadLocal(shard int, off, n int64, verify bool) ([]byte, error) {
	v.mu.RLock()
	s := v.shards[shard]
	v.mu.RUnlock()
	if s == nil {
		return nil, fmt.Errorf("%w: shard %d of volume %d not here", ErrShardUnavailable, shard, v.ID)
	}
	return s.ReadAt(off, n, verify)
}

// ReadLocalInto is ReadLocal into b (see Shard.ReadInto).
func (v *Volume) ReadLocalInto(shard int, b []byte, off int64, verify bool) error {
	v.mu.RLock()
	s := v.shards[shard]
	v.mu.RUnlock()
	if s == nil {
		return fmt.Errorf("%w: shard %d of volume %d not here", ErrShardUnavailable, shard, v.ID)
	}
	return s.ReadInto(b, off, verify)
}

// LocalFetcher reads the shards held here (and no other).
func (v *Volume) LocalFetcher() Fetcher { return localFetcher{v} }

type localFetcher struct{ v *Volume }

func (l localFetcher) Fetch(ctx context.Context, shard int, off, n int64, verify bool) ([]byte, error) {
	return l.v.ReadLocal(shard, off, n, verify)
}

func (l localFetcher) FetchVerifiedInto(ctx context.Context, shards []int, off int64, dst [][]byte) []error {
	errs := make([]error, len(shards))
	for j, i := range shards {
		errs[j] = l.v.ReadLocalInto(i, dst[j], off, true)
	}
	return errs
}

// VerifyShards reads every block of the shards in set held here.
func (v *Volume) VerifyShards(set ShardSet) error {
	for _, i := range set.List() {
		v.mu.RLock()
		s := v.shards[i]
		v.mu.RUnlock()
		if s == nil {
			return fmt.Errorf("%w: shard %d of volume %d not here", ErrShardUnavailable, i, v.ID)
		}
		if err := s.Verify(); err != nil {
			return err
		}
	}
	return nil
}

// Locate returns the index entry of key, or ErrNotFound / ErrDeleted.
func (v *Volume) Locate(key uint64) (needle.IndexEntry, error) {
	e, ok := v.Index.Find(key)
	if !ok {
		return e, fmt.Errorf("ec volume %d: needle %x: %w", v.ID, key, volume.ErrNotFound)
	}
	v.mu.RLock()
	_, gone := v.deleted[key]
	v.mu.RUnlock()
	if gone {
		return e, fmt.Errorf("ec volume %d: needle %x: %w", v.ID, key, volume.ErrDeleted)
	}
	return e, nil
}

// Read returns the verified needle key: its record read through fetch (one
// range read when healthy), reconstructed around a shard that cannot be read
// or whose bytes fail the needle's checksum. bad names the shards that
// failed. Errors: volume.ErrNotFound (unknown or expired), ErrDeleted,
// ErrCookieMismatch, ErrTooFewShards.
func (v *Volume) Read(ctx context.Context, key uint64, cookie uint32, fetch Fetcher, prefer []int, now time.Time) (rec needle.Record, bad ShardSet, err error) {
	e, err := v.Locate(key)
	if err != nil {
		return rec, 0, err
	}
	l := v.Index.Layout
	n := needle.RecordSize(e.Size)
	b, bad, err := ReadRange(ctx, l, fetch, e.Offset, n, 0, prefer)
	if err == nil {
		rec, err = needle.ParseRecord(b)
	}
	if err != nil || rec.Header.Key != key {
		// The bytes the data shards gave fail the needle's CRC: rebuild them
		// from the other shards, trusting only block-verified reads.
		exts, lerr := l.Locate(e.Offset, n)
		if lerr != nil {
			return rec, bad, lerr
		}
		avoid := bad
		for _, x := range exts {
			avoid = avoid.With(x.Shard)
		}
		var more ShardSet
		b, more, err = ReadRange(ctx, l, fetch, e.Offset, n, avoid, prefer)
		bad |= more | avoid
		if err != nil {
			return rec, bad, fmt.Errorf("ec volume %d: needle %x: %w", v.ID, key, err)
		}
		if rec, err = needle.ParseRecord(b); err != nil {
			return rec, bad, fmt.Errorf("ec volume %d: needle %x: %w", v.ID, key, err)
		}
	}
	if rec.Header.Key != key || rec.Header.BodySize != e.Size {
		return rec, bad, fmt.Errorf("ec volume %d: needle %x: %w", v.ID, key, needle.ErrCorrupt)
	}
	if rec.Meta.Cookie != cookie {
		return rec, bad, fmt.Errorf("ec volume %d: read %x: %w", v.ID, key, volume.ErrCookieMismatch)
	}
	if expired(&rec.Meta, v.sb.TTL, now) {
		return rec, bad, fmt.Errorf("ec volume %d: needle %x expired: %w", v.ID, key, volume.ErrNotFound)
	}
	return rec, bad, nil
}

func expired(m *needle.Meta, volTTL ttl.TTL, now time.Time) bool {
	t := m.TTL
	if t.IsZero() {
		t = volTTL
	}
	if t.IsZero() || m.AppendedAtNs == 0 {
		return false
	}
	return now.After(time.Unix(0, m.AppendedAtNs).Add(t.Duration()))
}

// Delete records key as deleted in the journal (synced before it returns).
// The cookie is checked against the record when check is given: it reads
// the needle's header through it.
func (v *Volume) Delete(key uint64) error {
	if _, err := v.Locate(key); err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.sealed {
		return fmt.Errorf("ec volume %d: %w", v.ID, ErrSealed)
	}
	if v.closed {
		return fmt.Errorf("ec volume %d: %w", v.ID, volume.ErrClosed)
	}
	if _, gone := v.deleted[key]; gone {
		return nil
	}
	rec := AppendJournal(nil, key)
	if _, err := v.journal.WriteAt(rec, v.jsize); err != nil {
		return fmt.Errorf("ec volume %d: journal: %w", v.ID, err)
	}
	if err := v.journal.Sync(); err != nil {
		return fmt.Errorf("ec volume %d: journal: %w", v.ID, err)
	}
	v.jsize += int64(len(rec))
	v.deleted[key] = struct{}{}
	return nil
}

// Seal makes every later Delete fail with ErrSealed and returns the keys
// deleted until then, sorted: a delete either is in that list or fails
// (and is sent to the decoded volume), never journaled unseen in between.
func (v *Volume) Seal() []uint64 {
	v.mu.Lock()
	v.sealed = true
	v.mu.Unlock()
	return v.Deleted()
}

// Unseal undoes Seal (the hand-over failed: the EC volume stays).
func (v *Volume) Unseal() {
	v.mu.Lock()
	v.sealed = false
	v.mu.Unlock()
}

// Deleted returns the deleted keys, sorted.
func (v *Volume) Deleted() []uint64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]uint64, 0, len(v.deleted))
	for k := range v.deleted {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Stats summarizes the volume for heartbeats.
func (v *Volume) Stats() (files, deleted int64) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return int64(len(v.Index.Entries)), int64(len(v.deleted))
}

// Close closes every file.
func (v *Volume) Close() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil
	}
	v.closed = true
	for i, s := range v.shards {
		s.Close()
		delete(v.shards, i)
	}
	if v.journal != nil {
		return v.journal.Close()
	}
	return nil
}

// Destroy closes the volume and removes all its files from dir.
func (v *Volume) Destroy() error {
	shards := v.Shards()
	v.Close()
	var errs []error
	names := []string{IndexName(v.base), JournalName(v.base)}
	for _, i := range shards.List() {
		names = append(names, ShardName(v.base, i))
	}
	// Shard files not mounted (a failed copy) go too.
	for i := range MaxShards {
		names = append(names, ShardName(v.base, i))
	}
	for _, n := range names {
		if err := v.fsys.Remove(filepath.Join(v.dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, v.fsys.SyncDir(v.dir))
	return errors.Join(errs...)
}

// MergeDeletes records as deleted the keys of keys this volume has live
// (another holder's journal) and returns how many were new here.
func (v *Volume) MergeDeletes(keys []uint64) (int, error) {
	n := 0
	for _, k := range keys {
		if _, err := v.Locate(k); err != nil {
			continue // unknown here, or deleted already
		}
		if err := v.Delete(k); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
