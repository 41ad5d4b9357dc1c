package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/ttl"
	"github.com/kelpfs/kelp/internal/vfs"
	"github.com/kelpfs/kelp/internal/volume"
)

// Errors returned (wrapped) by Store methods.
var (
	ErrNotFound = errors.New("store: volume not found")
	ErrExists   = errors.New("store: volume already exists")
	ErrNoSlot   = errors.New("store: no free volume slot")
	ErrClosed   = errors.New("store: closed")
)

// DiskConfig is one data directory and how many volumes it may hold.
type DiskConfig struct {
	Dir        string
	MaxVolumes int
}

// Config configures a Store.
type Config struct {
	Disks           []DiskConfig
	FS              vfs.FS // nil means vfs.OS()
	VolumeSizeLimit int64
	Fsync           bool
	// OnChange is called after the set of volumes or a volume's writability
	// changed; calls are coalesced and made from the Store's own goroutine.
	OnChange func()
	Logger   *slog.Logger
}

// DiskStatus describes one disk.
type DiskStatus struct {
	Dir        string
	MaxVolumes int
	FreeBytes  uint64 // 0 when the FS cannot tell
	Volumes    []volume.Stats
	EcShards   []EcStatus
}

// VacuumResult describes a Vacuum call.
type VacuumResult struct {
	Vacuumed           bool
	GarbageRatioBefore float64
	SizeBefore         int64
	SizeAfter          int64
}

type disk struct {
	DiskConfig
	count int // volumes on this disk; guarded by Store.mu
}

type entry struct {
	v    *volume.Volume
	disk *disk
}

// Store is one server's disks and volumes. Safe for concurrent use.
type Store struct {
	cfg   Config
	log   *slog.Logger
	disks []*disk

	mu        sync.RWMutex
	volumes   map[uint32]*entry
	ec        map[uint32]*ecEntry // erasure-coded volumes with shards here
	importing map[uint32]bool     // ids whose copy is arriving (Import)
	closed    bool

	// sizeLimit is read when a volume opens (also during Import, without
	// mu) and set from heartbeat answers.
	sizeLimit atomic.Int64

	notifyCh chan struct{}
	stop     chan struct{}
	wg       sync.WaitGroup
}

// New creates the disk directories and loads every volume found, one
// goroutine per disk. A volume that fails to open is logged and skipped, so
// one damaged volume does not keep the server down.
func New(cfg Config) (*Store, error) {
	if cfg.FS == nil {
		cfg.FS = vfs.OS()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if len(cfg.Disks) == 0 {
		return nil, errors.New("store: no disks configured")
	}
	s := &Store{
		cfg: cfg, log: cfg.Logger, volumes: map[uint32]*entry{}, ec: map[uint32]*ecEntry{},
		notifyCh: make(chan struct{}, 1), stop: make(chan struct{}),
	}
	s.sizeLimit.Store(cfg.VolumeSizeLimit)
	for _, dc := range cfg.Disks {
		if err := cfg.FS.MkdirAll(dc.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("store: disk %s: %w", dc.Dir, err)
		}
		s.disks = append(s.disks, &disk{DiskConfig: dc})
	}
	type loaded struct {
		d *disk
		v *volume.Volume
	}
	results := make([][]loaded, len(s.disks))
	var wg sync.WaitGroup
	errs := make([]error, len(s.disks))
	for i, d := range s.disks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			names, err := cfg.FS.ReadDir(d.Dir)
			if err != nil {
				errs[i] = fmt.Errorf("store: disk %s: %w", d.Dir, err)
				return
			}
			for _, name := range names {
				collection, id, ok := ParseFileName(name)
				if !ok {
					continue
				}
				v, err := volume.Open(s.volumeConfig(d, id, collection))
				if err != nil {
					s.log.Error("skipping volume that failed to open", "dir", d.Dir, "file", name, "err", err)
					continue
				}
				results[i] = append(results[i], loaded{d, v})
			}
			s.loadEC(d, names)
		}()
	}
	wg.Wait()
	for i, list := range results {
		for _, l := range list {
			id := l.v.Stats().ID
			if _, dup := s.volumes[id]; dup {
				s.log.Error("volume id present on two disks; ignoring the second", "volume", id, "dir", l.d.Dir)
				l.v.Close()
				continue
			}
			s.volumes[id] = &entry{v: l.v, disk: l.d}
			l.d.count++
		}
		if errs[i] != nil {
			s.closeAll()
			return nil, errs[i]
		}
	}
	s.wg.Add(1)
	go s.notifier()
	return s, nil
}

// ParseFileName splits "<collection>_<id>.dat" or "<id>.dat". Collections
// may contain '_': the id follows the last one.
func ParseFileName(name string) (collection string, id uint32, ok bool) {
	base, found := strings.CutSuffix(name, ".dat")
	if !found {
		return "", 0, false
	}
	idStr := base
	if i := strings.LastIndexByte(base, '_'); i >= 0 {
		collection, idStr = base[:i], base[i+1:]
		if collection == "" {
			return "", 0, false
		}
	}
	n, err := strconv.ParseUint(idStr, 10, 32)
	if err != nil || n == 0 || strconv.FormatUint(n, 10) != idStr {
		return "", 0, false
	}
	return collection, uint32(n), true
}

func (s *Store) volumeConfig(d *disk, id uint32, collection string) volume.Config {
	return volume.Config{
		FS: s.cfg.FS, Dir: d.Dir, ID: id, Collection: collection,
		SizeLimit: s.sizeLimit.Load(), Fsync: s.cfg.Fsync, OnChange: s.notify,
		Logger: s.log,
	}
}

// notify schedules an OnChange call; it never blocks.
func (s *Store) notify() {
	select {
	case s.notifyCh <- struct{}{}:
	default:
	}
}

func (s *Store) notifier() {
	defer s.wg.Done()
	for {
		select {
		case <-s.stop:
			return
		case <-s.notifyCh:
			if s.cfg.OnChange != nil {
				s.cfg.OnChange()
			}
		}
	}
}

// Allocate creates volume id on the disk with the most free slots.
func (s *Store) Allocate(id uint32, collection string, r replication.Code, t ttl.TTL) error {
	if id == 0 || strings.ContainsAny(collection, `/\`) || collection == "." || collection == ".." {
		return fmt.Errorf("store: allocate %d: invalid id or collection %q", id, collection)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if _, ok := s.volumes[id]; ok {
		s.mu.Unlock()
		return fmt.Errorf("store: allocate %d: %w", id, ErrExists)
	}
	var best *disk
	for _, d := range s.disks {
		if free := d.MaxVolumes - d.count; free > 0 && (best == nil || free > best.MaxVolumes-best.count) {
			best = d
		}
	}
	if best == nil {
		s.mu.Unlock()
		return fmt.Errorf("store: allocate %d: %w", id, ErrNoSlot)
	}
	cfg := s.volumeConfig(best, id, collection)
	cfg.Replication, cfg.TTL = r, t
	// Creating under the lock keeps two Allocates of one id from racing; it
	// is a few small writes and syncs.
	v, err := volume.Create(cfg)
	if err != nil {
		s.mu.Unlock()
		return fmt.Errorf("store: allocate %d: %w", id, err)
	}
	s.volumes[id] = &entry{v: v, disk: best}
	best.count++
	s.mu.Unlock()
	s.log.Info("allocated volume", "volume", id, "collection", collection, "dir", best.Dir)
	s.notify()
	return nil
}

// Volume returns volume id.
func (s *Store) Volume(id uint32) (*volume.Volume, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.volumes[id]
	if !ok {
		return nil, false
	}
	return e.v, true
}

func (s *Store) get(id uint32) (*volume.Volume, error) {
	v, ok := s.Volume(id)
	if !ok {
		return nil, fmt.Errorf("store: volume %d: %w", id, ErrNotFound)
	}
	return v, nil
}

// Delete removes volume id and its files.
func (s *Store) Delete(id uint32) error {
	s.mu.Lock()
	e, ok := s.volumes[id]
	if ok {
		delete(s.volumes, id)
		e.disk.count--
	}
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("store: delete %d: %w", id, ErrNotFound)
	}
	err := e.v.Destroy()
	s.notify()
	if err != nil {
		return fmt.Errorf("store: delete %d: %w", id, err)
	}
	return nil
}

// MarkReadOnly marks volume id read-only or writable.
func (s *Store) MarkReadOnly(id uint32, ro bool) error {
	v, err := s.get(id)
	if err != nil {
		return err
	}
	err = v.SetReadOnly(ro)
	s.notify()
	return err
}

// Vacuum compacts volume id if its garbage ratio is at least threshold.
func (s *Store) Vacuum(ctx context.Context, id uint32, threshold float64) (VacuumResult, error) {
	v, err := s.get(id)
	if err != nil {
		return VacuumResult{}, err
	}
	before := v.Stats()
	res := VacuumResult{GarbageRatioBefore: before.GarbageRatio, SizeBefore: before.Size, SizeAfter: before.Size}
	if before.GarbageRatio < threshold || before.DeletedBytes == 0 {
		return res, nil
	}
	if err := v.Vacuum(ctx); err != nil {
		return res, fmt.Errorf("store: vacuum %d: %w", id, err)
	}
	res.Vacuumed, res.SizeAfter = true, v.Stats().Size
	s.notify()
	return res, nil
}

// Status reports every disk and its volumes, sorted by volume id.
func (s *Store) Status() []DiskStatus {
	s.mu.RLock()
	byDisk := map[*disk][]*volume.Volume{}
	for _, e := range s.volumes {
		byDisk[e.disk] = append(byDisk[e.disk], e.v)
	}
	s.mu.RUnlock()
	out := make([]DiskStatus, 0, len(s.disks))
	for _, d := range s.disks {
		ds := DiskStatus{Dir: d.Dir, MaxVolumes: d.MaxVolumes}
		if fsp, ok := s.cfg.FS.(vfs.FreeSpacer); ok {
			if n, err := fsp.FreeBytes(filepath.Clean(d.Dir)); err == nil {
				ds.FreeBytes = n
			}
		}
		for _, v := range byDisk[d] {
			ds.Volumes = append(ds.Volumes, v.Stats())
		}
		sort.Slice(ds.Volumes, func(i, j int) bool { return ds.Volumes[i].ID < ds.Volumes[j].ID })
		ds.EcShards = s.ecStatus(d)
		out = append(out, ds)
	}
	return out
}

// SetVolumeSizeLimit changes the size limit of every volume, present and future.
func (s *Store) SetVolumeSizeLimit(limit int64) {
	changed := s.sizeLimit.Swap(limit) != limit
	s.mu.Lock()
	vols := make([]*volume.Volume, 0, len(s.volumes))
	for _, e := range s.volumes {
		vols = append(vols, e.v)
	}
	s.mu.Unlock()
	for _, v := range vols {
		v.SetSizeLimit(limit)
	}
	if changed {
		s.notify()
	}
}

// Close closes every volume and stops the notifier.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	s.wg.Wait()
	return s.closeAll()
}

func (s *Store) closeAll() error {
	s.mu.Lock()
	vols := s.volumes
	s.volumes = map[uint32]*entry{}
	ecs := s.ec
	s.ec = map[uint32]*ecEntry{}
	s.mu.Unlock()
	var errs []error
	for _, e := range ecs {
		if err := e.v.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, e := range vols {
		if err := e.v.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
