package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kelpfs/kelp/internal/erasure"
	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/vfs"
	"github.com/kelpfs/kelp/internal/volume"
)

// ErrNotReadOnly: a volume that may still be written to cannot be encoded.
var ErrNotReadOnly = errors.New("store: volume is still writable")

type ecEntry struct {
	v    *erasure.Volume
	disk *disk
}

// EcStatus describes one EC volume's shards on this server.
type EcStatus struct {
	ID          uint32
	Collection  string
	Scheme      erasure.Scheme
	Shards      erasure.ShardSet
	ShardSize   int64 // bytes of one shard file
	FileCount   int64
	DeleteCount int64
}

// loadEC opens the EC volumes of a disk (every "<base>.ecx").
func (s *Store) loadEC(d *disk, names []string) {
	for _, name := range names {
		base, ok := strings.CutSuffix(name, ".ecx")
		if !ok {
			continue
		}
		collection, id, ok := ParseFileName(base + ".dat")
		if !ok {
			continue
		}
		v, err := erasure.OpenVolume(s.cfg.FS, d.Dir, collection, id)
		if err != nil {
			s.log.Error("skipping EC volume that failed to open", "dir", d.Dir, "file", name, "err", err)
			continue
		}
		s.mu.Lock()
		if _, dup := s.ec[id]; dup {
			s.mu.Unlock()
			s.log.Error("EC volume id present on two disks; ignoring the second", "volume", id, "dir", d.Dir)
			v.Close()
			continue
		}
		s.ec[id] = &ecEntry{v: v, disk: d}
		s.mu.Unlock()
	}
}

// EcVolume returns this server's part of EC volume id.
func (s *Store) EcVolume(id uint32) (*erasure.Volume, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.ec[id]
	if !ok {
		return nil, false
	}
	return e.v, true
}

func (s *Store) ecStatus(d *disk) []EcStatus {
	s.mu.RLock()
	var vs []*erasure.Volume
	for _, e := range s.ec {
		if e.disk == d {
			vs = append(vs, e.v)
		}
	}
	s.mu.RUnlock()
	out := make([]EcStatus, 0, len(vs))
	for _, v := range vs {
		files, deleted := v.Stats()
		l := v.Layout()
		out = append(out, EcStatus{ID: v.ID, Collection: v.Collection, Scheme: l.Scheme, Shards: v.Shards(),
			ShardSize: erasure.ShardFileSize(l), FileCount: files, DeleteCount: deleted})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// EcEncode writes all k+m shards of read-only volume id and its EC index
// next to it, and serves them. The volume itself stays (its copies are
// deleted by whoever drives the encoding, once the shards are spread and
// verified).
func (s *Store) EcEncode(ctx context.Context, id uint32, scheme erasure.Scheme, progress func(done, total int64)) error {
	s.mu.RLock()
	e, ok := s.volumes[id]
	_, hasEC := s.ec[id]
	s.mu.RUnlock()
	if !ok {
		return fmt.Errorf("store: encode %d: %w", id, ErrNotFound)
	}
	if hasEC {
		return fmt.Errorf("store: encode %d: EC shards already here: %w", id, ErrExists)
	}
	st := e.v.Stats()
	if !st.ReadOnly {
		return fmt.Errorf("store: encode %d: %w (mark it read-only first)", id, ErrNotReadOnly)
	}
	r, size, release, err := e.v.OpenData()
	if err != nil {
		return fmt.Errorf("store: encode %d: %w", id, err)
	}
	defer release()
	base := volume.BaseName(st.Collection, id)
	if _, err := erasure.Encode(ctx, s.cfg.FS, r, size, e.disk.Dir, base, id, scheme, progress); err != nil {
		return fmt.Errorf("store: encode %d: %w", id, err)
	}
	return s.mountEC(e.disk, st.Collection, id)
}

func (s *Store) mountEC(d *disk, collection string, id uint32) error {
	v, err := erasure.OpenVolume(s.cfg.FS, d.Dir, collection, id)
	if err != nil {
		return fmt.Errorf("store: EC volume %d: %w", id, err)
	}
	s.mu.Lock()
	if old, ok := s.ec[id]; ok {
		old.v.Close()
	}
	s.ec[id] = &ecEntry{v: v, disk: d}
	s.mu.Unlock()
	s.notify()
	return nil
}

// ecDisk is the disk holding EC volume id's files here, or the disk with
// the most free slots for a volume new here.
func (s *Store) ecDisk(id uint32) (*disk, *erasure.Volume) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if e, ok := s.ec[id]; ok {
		return e.disk, e.v
	}
	best := s.disks[0]
	for _, d := range s.disks {
		if d.MaxVolumes-d.count > best.MaxVolumes-best.count {
			best = d
		}
	}
	return best, nil
}

// FileSource streams one file of an EC volume (by name suffix: ".ecx",
// ".ecj", ".ec03") from another server into w.
type FileSource func(ctx context.Context, ext string, w io.Writer) error

// EcImport copies shards of EC volume id from another server (and, when
// this server has no part of the volume yet, its index and journal),
// verifies every block, syncs, and serves them. A failure leaves nothing
// new behind.
func (s *Store) EcImport(ctx context.Context, id uint32, collection string, shards erasure.ShardSet, src FileSource) error {
	d, v := s.ecDisk(id)
	base := volume.BaseName(collection, id)
	var placed []string
	ok := false
	defer func() {
		if !ok {
			for _, p := range placed {
				s.cfg.FS.Remove(p)
			}
		}
	}()
	fetch := func(ext string) error {
		path := filepath.Join(d.Dir, base+ext)
		if err := s.pull(ctx, path, ext, src); err != nil {
			return fmt.Errorf("store: EC import %d %s: %w", id, ext, err)
		}
		placed = append(placed, path)
		return nil
	}
	if v == nil {
		for _, ext := range []string{".ecx", ".ecj"} {
			if err := fetch(ext); err != nil {
				return err
			}
		}
	}
	for _, i := range shards.List() {
		if v != nil && v.Shards().Has(i) {
			continue
		}
		if err := fetch(filepath.Ext(erasure.ShardName(base, i))); err != nil {
			return err
		}
	}
	if err := s.cfg.FS.SyncDir(d.Dir); err != nil {
		return err
	}
	if err := s.mountShards(d, collection, id, shards); err != nil {
		return err
	}
	ok = true
	return nil
}

// mountShards opens (or extends) EC volume id with the shards, verifying
// every block of them first.
func (s *Store) mountShards(d *disk, collection string, id uint32, shards erasure.ShardSet) error {
	_, v := s.ecDisk(id)
	if v == nil {
		nv, err := erasure.OpenVolume(s.cfg.FS, d.Dir, collection, id)
		if err != nil {
			return fmt.Errorf("store: EC volume %d: %w", id, err)
		}
		if err := nv.VerifyShards(shards); err != nil {
			nv.Close()
			return fmt.Errorf("store: EC volume %d: %w", id, err)
		}
		s.mu.Lock()
		s.ec[id] = &ecEntry{v: nv, disk: d}
		s.mu.Unlock()
	} else {
		if err := v.Mount(shards); err != nil {
			return fmt.Errorf("store: EC volume %d: %w", id, err)
		}
		if err := v.VerifyShards(shards); err != nil {
			v.Unmount(shards, false)
			return fmt.Errorf("store: EC volume %d: %w", id, err)
		}
	}
	s.notify()
	return nil
}

// pull writes path from src through a synced temporary file.
func (s *Store) pull(ctx context.Context, path, ext string, src FileSource) error {
	tmp := path + ".tmp"
	f, err := s.cfg.FS.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	err = src(ctx, ext, &appender{f: f})
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	if err == nil {
		err = s.cfg.FS.Rename(tmp, path)
	}
	if err != nil {
		s.cfg.FS.Remove(tmp)
	}
	return err
}

// EcUnmount stops serving shards of EC volume id and deletes their files;
// with no shard left, the index and journal go too.
func (s *Store) EcUnmount(id uint32, shards erasure.ShardSet) error {
	s.mu.RLock()
	e, ok := s.ec[id]
	s.mu.RUnlock()
	if !ok {
		return fmt.Errorf("store: EC volume %d: %w", id, ErrNotFound)
	}
	if e.v.Shards()&^shards == 0 {
		// The last shards here go. When this server holds the volume
		// decoded from them (ec.decode's switch), deletes journaled on the
		// EC volume after the decode read the journal would be lost: new
		// requests are sent to the decoded volume first, then the journal
		// is sealed (a delete that took the EC volume before and journals
		// only now fails with erasure.ErrSealed, and its handler sends it
		// to the decoded volume) and applied to it.
		if nv, ok := s.Volume(id); ok {
			s.mu.Lock()
			delete(s.ec, id)
			s.mu.Unlock()
			if err := applyECDeletes(e.v, e.v.Seal(), nv); err != nil {
				e.v.Unseal()
				s.mu.Lock()
				s.ec[id] = e
				s.mu.Unlock()
				return fmt.Errorf("store: EC volume %d: deletes not yet in the decoded volume: %w", id, err)
			}
		}
	}
	err := e.v.Unmount(shards, true)
	if e.v.Shards() == 0 {
		s.mu.Lock()
		delete(s.ec, id)
		s.mu.Unlock()
		err = errors.Join(err, e.v.Destroy())
	}
	s.notify()
	return err
}

// applyECDeletes deletes from nv, the volume decoded from ev, the needles
// of deleted (ev's journal) that nv still has.
func applyECDeletes(ev *erasure.Volume, deleted []uint64, nv *volume.Volume) error {
	if len(deleted) == 0 {
		return nil
	}
	r, _, release, err := nv.OpenData()
	if err != nil {
		return err
	}
	defer release()
	head := make([]byte, needle.HeaderSize)
	for _, key := range deleted {
		e, ok := ev.Index.Find(key)
		if !ok {
			continue
		}
		// The decoded .dat has the EC volume's bytes: the record, with
		// the cookie a tombstone names, is at the same offset.
		if _, err := r.ReadAt(head, e.Offset); err != nil {
			return fmt.Errorf("needle %x: %w", key, err)
		}
		h, err := needle.ParseHeader(head)
		if err != nil || h.Key != key {
			return fmt.Errorf("needle %x: %w", key, needle.ErrCorrupt)
		}
		if _, err := nv.Delete(context.Background(), key, h.Cookie); err != nil &&
			!errors.Is(err, volume.ErrDeleted) && !errors.Is(err, volume.ErrNotFound) {
			return fmt.Errorf("needle %x: %w", key, err)
		}
	}
	return nil
}

// EcRebuild reconstructs shards of EC volume id here from k others read
// through fetch, then verifies and serves them. src supplies the index and
// journal when this server has no part of the volume yet.
func (s *Store) EcRebuild(ctx context.Context, id uint32, collection string, shards erasure.ShardSet, src FileSource, fetch erasure.Fetcher, progress func(done, total int64)) error {
	d, v := s.ecDisk(id)
	base := volume.BaseName(collection, id)
	if v == nil {
		for _, ext := range []string{".ecx", ".ecj"} {
			if err := s.pull(ctx, filepath.Join(d.Dir, base+ext), ext, src); err != nil {
				return fmt.Errorf("store: EC rebuild %d %s: %w", id, ext, err)
			}
		}
		nv, err := erasure.OpenVolume(s.cfg.FS, d.Dir, collection, id)
		if err != nil {
			return fmt.Errorf("store: EC rebuild %d: %w", id, err)
		}
		s.mu.Lock()
		s.ec[id] = &ecEntry{v: nv, disk: d}
		s.mu.Unlock()
		v = nv
	}
	shards &^= v.Shards()
	if shards == 0 {
		return nil
	}
	if err := erasure.Rebuild(ctx, s.cfg.FS, d.Dir, base, id, v.Layout(), fetch, shards, v.Shards().List(), progress); err != nil {
		if v.Shards() == 0 {
			s.EcUnmount(id, 0)
		}
		return fmt.Errorf("store: %w", err)
	}
	return s.mountShards(d, collection, id, shards)
}

// EcDecode rebuilds the original volume id here from the shards (read
// through fetch), with a tombstone for each needle deleted since encoding
// appended before the volume file is renamed into place (so that a crash
// never leaves a decoded volume that serves a deleted needle), and loads it
// as a normal volume. The EC parts here are left for the caller to remove.
func (s *Store) EcDecode(ctx context.Context, id uint32, collection string, fetch erasure.Fetcher) error {
	v, ok := s.EcVolume(id)
	if !ok {
		return fmt.Errorf("store: EC decode %d: no part of the volume here: %w", id, ErrNotFound)
	}
	// A tombstone names the needle's cookie: the first bytes of its record.
	var tombs []byte
	for _, key := range v.Deleted() {
		e, ok := v.Index.Find(key)
		if !ok {
			continue
		}
		head, _, err := erasure.ReadRange(ctx, v.Layout(), fetch, e.Offset, needle.HeaderSize, 0, v.Shards().List())
		if err != nil {
			return fmt.Errorf("store: EC decode %d: needle %x: %w", id, key, err)
		}
		h, err := needle.ParseHeader(head)
		if err != nil || h.Key != key {
			return fmt.Errorf("store: EC decode %d: needle %x: %w", id, key, needle.ErrCorrupt)
		}
		tombs = needle.AppendTombstone(tombs, key, h.Cookie)
	}
	return s.Import(ctx, id, collection, func(w io.Writer) error {
		if err := erasure.Decode(ctx, v.Layout(), fetch, w, v.Shards().List()); err != nil {
			return err
		}
		_, err := w.Write(tombs)
		return err
	})
}

// EcMount serves shard files of EC volume id already on this server's disk.
func (s *Store) EcMount(id uint32, collection string, shards erasure.ShardSet) error {
	d, _ := s.ecDisk(id)
	return s.mountShards(d, collection, id, shards)
}

// EcFile opens one file of EC volume id (".ecx", ".ecj", ".ec03"...) for reading.
func (s *Store) EcFile(id uint32, ext string) (vfs.File, error) {
	v, ok := s.EcVolume(id)
	if !ok {
		return nil, fmt.Errorf("store: EC volume %d: %w", id, ErrNotFound)
	}
	if ext != ".ecx" && ext != ".ecj" {
		if _, _, ok := erasure.ParseShardName(v.Base() + ext); !ok {
			return nil, fmt.Errorf("store: EC volume %d: no file %q", id, ext)
		}
	}
	f, err := vfs.Open(s.cfg.FS, filepath.Join(v.Dir(), v.Base()+ext))
	if err != nil {
		return nil, fmt.Errorf("store: EC volume %d: %w", id, err)
	}
	return f, nil
}
