package volume

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/ttl"
	"github.com/kelpfs/kelp/internal/vfs"
)

// Errors returned (wrapped) by Volume methods; test with errors.Is.
var (
	ErrNotFound       = errors.New("volume: needle not found")
	ErrDeleted        = errors.New("volume: needle deleted")
	ErrCookieMismatch = errors.New("volume: cookie mismatch")
	ErrReadOnly       = errors.New("volume: read-only")
	ErrFull           = errors.New("volume: full")
	ErrTooLarge       = errors.New("volume: needle too large")
	ErrNoSpace        = errors.New("volume: no space left on device")
	ErrClosed         = errors.New("volume: closed")
	ErrBroken         = errors.New("volume: disabled after an I/O error")
	ErrShortBody      = errors.New("volume: body shorter than its declared size")
	ErrVacuumRunning  = errors.New("volume: vacuum already running")
	// ErrCorrupt is needle.ErrCorrupt, re-exported for callers of this package.
	ErrCorrupt = needle.ErrCorrupt
)

// smallRecord is the largest record read with one positioned read; larger
// needles are read in ranges. (Writes build records up to bufferedRecord in
// memory.)
const smallRecord = 1 << 20

// Config describes one volume.
type Config struct {
	FS         vfs.FS
	Dir        string
	ID         uint32
	Collection string
	// Replication and TTL are used by Create; Open reads them from the superblock.
	Replication replication.Code
	TTL         ttl.TTL
	// SizeLimit: a write that would grow the .dat beyond it fails with ErrFull.
	// 0 means the format's maximum (32 GiB).
	SizeLimit int64
	// Fsync: acknowledge writes and deletes only after fdatasync (group commit).
	Fsync bool
	// CheckpointInterval is how often a changed volume writes its index
	// checkpoint, bounding the .dat re-scan on Open; 0 means 30s, <0 never
	// (Close still checkpoints).
	CheckpointInterval time.Duration
	// OnChange, if set, is called with no lock held when the volume's
	// writability changes by itself (it became full, or an I/O error disabled it).
	OnChange func()
	Logger   *slog.Logger
	// Now is the clock for TTL expiry; nil means time.Now.
	Now func() time.Time
}

// BaseName is the file name of a volume without extension:
// "<collection>_<id>", or "<id>" when the collection is empty.
func BaseName(collection string, id uint32) string {
	if collection == "" {
		return strconv.FormatUint(uint64(id), 10)
	}
	return collection + "_" + strconv.FormatUint(uint64(id), 10)
}

// Stats is a snapshot of a volume's state.
type Stats struct {
	ID                 uint32
	Collection         string
	Replication        replication.Code
	TTL                ttl.TTL
	Version            uint8
	CompactionRevision uint32
	Size               int64 // bytes in the .dat
	FileCount          int64 // live needles
	DeleteCount        int64 // deletes since the last vacuum
	DeletedBytes       int64 // bytes of deleted and overwritten records (and tombstones)
	ReadOnly           bool  // marked read-only, or disabled by an I/O error
	Full               bool  // the last write hit SizeLimit
	GarbageRatio       float64
	ModifiedAt         time.Time
}

// WriteResult describes a completed write.
type WriteResult struct {
	ETag      string // CRC32C of the data, 8 hex digits
	Size      int64  // data bytes
	Unchanged bool   // identical to the stored needle; nothing was written
}

// datFile is a ref-counted open .dat, so a reader can keep using the file a
// vacuum has just replaced.
type datFile struct {
	f    vfs.File
	refs atomic.Int32
}

func (d *datFile) acquire() *datFile { d.refs.Add(1); return d }

func (d *datFile) release() {
	if d.refs.Add(-1) == 0 {
		d.f.Close()
	}
}

// Volume is one append-only volume. All methods are safe for concurrent use.
type Volume struct {
	cfg  Config
	log  *slog.Logger
	base string // path without extension

	// appendMu serializes everything that appends to the files (writes,
	// deletes, checkpoints, the vacuum switch). A large body streams while
	// holding it.
	appendMu  sync.Mutex
	ckpDirty  atomic.Bool
	sizeLimit atomic.Int64  // Config.SizeLimit, changeable by SetSizeLimit
	appends   atomic.Uint64 // mirrors seq for the syncer's lock-free peeking

	// mu guards the fields below; appends take it briefly to publish.
	mu         sync.RWMutex
	sb         needle.Superblock
	dat        *datFile
	idx        *needleIndex
	idxFile    vfs.File
	idxBuf     []byte // index records not yet written to idxFile
	idxFlushed int64  // entries in idxFile
	idxCRC     uint32 // CRC32C of the entries in idxFile
	tail       int64
	seq        uint64 // number of appends; the group-commit clock
	counts     counters
	modifiedAt time.Time
	readOnly   bool
	full       bool
	broken     error
	closed     bool
	vacuuming  bool

	syncer syncer
	stop   chan struct{}
	wg     sync.WaitGroup
}

type counters struct {
	files, deletes, garbage int64
}

func (c *counters) apply(old indexEntry, existed bool, e indexEntry) {
	if existed && old.size != needle.TombstoneSize {
		c.garbage += needle.RecordSize(old.size)
		c.files--
	}
	if e.size == needle.TombstoneSize {
		c.garbage += needle.RecordSize(0)
		if existed && old.size != needle.TombstoneSize {
			c.deletes++
		}
	} else {
		c.files++
	}
}

func (cfg *Config) path(ext string) string {
	return filepath.Join(cfg.Dir, BaseName(cfg.Collection, cfg.ID)+ext)
}

func newVolume(cfg Config) *Volume {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SizeLimit <= 0 || cfg.SizeLimit > needle.MaxOffset {
		cfg.SizeLimit = needle.MaxOffset
	}
	if cfg.CheckpointInterval == 0 {
		cfg.CheckpointInterval = 30 * time.Second
	}
	v := &Volume{
		cfg:  cfg,
		log:  cfg.Logger.With("volume", cfg.ID, "collection", cfg.Collection),
		base: cfg.path(""),
		idx:  newNeedleIndex(),
		stop: make(chan struct{}),
	}
	v.syncer.init()
	v.sizeLimit.Store(cfg.SizeLimit)
	return v
}

// Create makes a new, empty volume. It fails if the .dat already exists.
func Create(cfg Config) (*Volume, error) {
	v := newVolume(cfg)
	cfg = v.cfg
	if err := cfg.FS.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("volume %d: create: %w", cfg.ID, err)
	}
	v.sb = needle.Superblock{Version: needle.Version, Replication: cfg.Replication, TTL: cfg.TTL, CreatedAtNs: cfg.Now().UnixNano()}
	f, err := cfg.FS.OpenFile(v.base+".dat", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		// A .dat too short for a superblock is what a crash during an earlier
		// Create leaves; it holds no data, so it may be replaced.
		if st, serr := cfg.FS.Stat(v.base + ".dat"); serr == nil && st.Size() < needle.SuperblockSize {
			f, err = cfg.FS.OpenFile(v.base+".dat", os.O_RDWR|os.O_TRUNC, 0o644)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("volume %d: create: %w", cfg.ID, err)
	}
	fail := func(err error) (*Volume, error) {
		f.Close()
		cfg.FS.Remove(v.base + ".dat")
		return nil, fmt.Errorf("volume %d: create: %w", cfg.ID, noSpace(err))
	}
	if _, err := f.WriteAt(v.sb.Marshal(), 0); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	idx, err := cfg.FS.OpenFile(v.base+".idx", os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fail(err)
	}
	if err := cfg.FS.SyncDir(cfg.Dir); err != nil {
		idx.Close()
		return fail(err)
	}
	v.dat = &datFile{f: f}
	v.dat.refs.Store(1)
	v.idxFile = idx
	v.tail = needle.SuperblockSize
	v.modifiedAt = cfg.Now()
	if err := v.checkpoint(); err != nil {
		v.Close()
		return nil, fmt.Errorf("volume %d: create: %w", cfg.ID, err)
	}
	v.start()
	return v, nil
}

func (v *Volume) start() {
	if v.cfg.Fsync {
		v.wg.Add(1)
		go v.syncLoop()
	}
	if v.cfg.CheckpointInterval > 0 {
		v.wg.Add(1)
		go v.checkpointLoop()
	}
}

func (v *Volume) checkpointLoop() {
	defer v.wg.Done()
	t := time.NewTicker(v.cfg.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-v.stop:
			return
		case <-t.C:
			if v.ckpDirty.Load() {
				if err := v.checkpoint(); err != nil {
					v.log.Warn("checkpoint failed", "err", err)
				}
			}
		}
	}
}

// noSpace marks ENOSPC with ErrNoSpace, keeping the original error too.
func noSpace(err error) error {
	if errors.Is(err, syscall.ENOSPC) && !errors.Is(err, ErrNoSpace) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return err
}

// writable returns why the volume refuses writes, if it does. mu held.
func (v *Volume) writableLocked() error {
	switch {
	case v.closed:
		return ErrClosed
	case v.broken != nil:
		return fmt.Errorf("%w: %w", ErrBroken, v.broken)
	case v.readOnly:
		return ErrReadOnly
	}
	return nil
}

// markBroken disables writes after an I/O error whose effect on the files is
// unknown (a failed fsync or a failed cleanup), and tells the owner.
func (v *Volume) markBroken(err error) {
	v.mu.Lock()
	first := v.broken == nil && !v.closed
	if first {
		v.broken = err
	}
	v.mu.Unlock()
	if first {
		v.log.Error("volume disabled after I/O error", "err", err)
		if v.cfg.OnChange != nil {
			v.cfg.OnChange()
		}
	}
}

// SetReadOnly marks the volume read-only or writable.
//
// The mark survives restarts: it is a marker file ("<base>.ro") next to the
// .dat, so an operator's decision is not undone by a reboot.
func (v *Volume) SetReadOnly(ro bool) error {
	if err := v.persistReadOnly(ro); err != nil {
		return fmt.Errorf("volume %d: mark read-only=%v: %w", v.cfg.ID, ro, err)
	}
	v.mu.Lock()
	v.readOnly = ro
	if !ro {
		v.full = false // let the next write re-check the size limit
	}
	v.mu.Unlock()
	return nil
}

func (v *Volume) persistReadOnly(ro bool) error {
	marker := v.base + ".ro"
	if ro {
		f, err := v.cfg.FS.OpenFile(marker, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		f.Close()
	} else if err := v.cfg.FS.Remove(marker); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return v.cfg.FS.SyncDir(v.cfg.Dir)
}

// SetSizeLimit changes the size limit; a full volume may become writable.
func (v *Volume) SetSizeLimit(limit int64) {
	if limit <= 0 || limit > needle.MaxOffset {
		limit = needle.MaxOffset
	}
	v.mu.Lock()
	v.sizeLimit.Store(limit)
	if v.tail < limit {
		v.full = false
	}
	v.mu.Unlock()
}

// Stats returns a snapshot of the volume's counters.
func (v *Volume) Stats() Stats {
	v.mu.RLock()
	defer v.mu.RUnlock()
	s := Stats{
		ID: v.cfg.ID, Collection: v.cfg.Collection,
		Replication: v.sb.Replication, TTL: v.sb.TTL, Version: v.sb.Version,
		CompactionRevision: v.sb.CompactionRevision,
		Size:               v.tail, FileCount: v.counts.files, DeleteCount: v.counts.deletes,
		DeletedBytes: v.counts.garbage, ReadOnly: v.readOnly || v.broken != nil, Full: v.full,
		ModifiedAt: v.modifiedAt,
	}
	if data := v.tail - needle.SuperblockSize; data > 0 {
		s.GarbageRatio = float64(v.counts.garbage) / float64(data)
	}
	return s
}

// Close checkpoints and closes the volume. Writes in flight finish first.
func (v *Volume) Close() error {
	v.appendMu.Lock()
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		v.appendMu.Unlock()
		return nil
	}
	v.mu.Unlock()
	err := v.checkpointLocked()
	v.mu.Lock()
	v.closed = true
	dat, idx := v.dat, v.idxFile
	v.mu.Unlock()
	v.appendMu.Unlock()
	close(v.stop)
	v.syncer.shutdown()
	v.wg.Wait()
	if cerr := idx.Close(); err == nil && cerr != nil {
		err = cerr
	}
	dat.release()
	if err != nil {
		return fmt.Errorf("volume %d: close: %w", v.cfg.ID, err)
	}
	return nil
}

// Destroy closes the volume and removes its files.
func (v *Volume) Destroy() error {
	v.Close()
	var first error
	for _, ext := range []string{".dat", ".idx", ".ckp", ".cpd", ".cpx", ".ro"} {
		if err := v.cfg.FS.Remove(v.base + ext); err != nil && !errors.Is(err, fs.ErrNotExist) && first == nil {
			first = err
		}
	}
	if err := v.cfg.FS.SyncDir(v.cfg.Dir); err != nil && first == nil {
		first = err
	}
	if first != nil {
		return fmt.Errorf("volume %d: destroy: %w", v.cfg.ID, first)
	}
	return nil
}

// expired reports whether a needle written at appendedAtNs has outlived its
// TTL, or the volume's when it has none.
func (v *Volume) expired(m *needle.Meta, volTTL ttl.TTL) bool {
	t := m.TTL
	if t.IsZero() {
		t = volTTL
	}
	if t.IsZero() || m.AppendedAtNs == 0 {
		return false
	}
	return v.cfg.Now().UnixNano() > m.AppendedAtNs+int64(t.Duration())
}

// waitDurable waits until append number seq is on stable storage; under
// WithUnhurriedSync it lets the fsync wait a little for others to share.
func (v *Volume) waitDurable(ctx context.Context, seq uint64) error {
	if !v.cfg.Fsync {
		return nil
	}
	if UnhurriedSync(ctx) {
		return v.syncer.waitUnhurried(seq)
	}
	return v.syncer.wait(seq)
}
