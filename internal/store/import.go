package store

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/volume"
)

// Import installs a volume copied from another server. fill writes the volume's
// .dat (as volume.OpenData returns it); once fill returns nil the file is
// synced, moved into place and opened, which rebuilds the index from the .dat.
// Until then the volume is invisible here, and any failure removes the partial
// file, so an interrupted copy leaves nothing behind.
func (s *Store) Import(ctx context.Context, id uint32, collection string, fill func(w io.Writer) error) error {
	d, err := s.reserveSlot(id)
	if err != nil {
		return fmt.Errorf("store: import %d: %w", id, err)
	}
	installed := false
	defer func() {
		if !installed {
			s.releaseSlot(id, d)
		}
	}()
	base := filepath.Join(d.Dir, volume.BaseName(collection, id))
	tmp := base + ".dat.importing"
	f, err := s.cfg.FS.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("store: import %d: %w", id, err)
	}
	err = fill(&appender{f: f})
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	if err == nil {
		// A stale index or checkpoint of an earlier copy must not be trusted.
		s.cfg.FS.Remove(base + ".idx")
		s.cfg.FS.Remove(base + ".ckp")
		err = s.cfg.FS.Rename(tmp, base+".dat")
	}
	if err == nil {
		err = s.cfg.FS.SyncDir(d.Dir)
	}
	if err != nil {
		s.cfg.FS.Remove(tmp)
		return fmt.Errorf("store: import %d: %w", id, err)
	}
	cfg := s.volumeConfig(d, id, collection)
	v, err := volume.Open(cfg)
	if err != nil {
		return fmt.Errorf("store: import %d: %w", id, err)
	}
	s.mu.Lock()
	s.volumes[id] = &entry{v: v, disk: d}
	s.mu.Unlock()
	// A heartbeat may have changed the limit while the volume opened; it
	// set the volumes it found in the map, which this one was not yet in.
	limit := s.sizeLimit.Load()
	if limit != cfg.SizeLimit {
		v.SetSizeLimit(limit)
	}
	installed = true
	s.log.Info("imported volume", "volume", id, "collection", collection, "dir", d.Dir)
	s.notify()
	return nil
}

// reserveSlot takes a slot on the disk with the most free slots for a volume
// that is about to arrive; the volume id must not exist here yet.
func (s *Store) reserveSlot(id uint32) (*disk, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if _, ok := s.volumes[id]; ok || s.importing[id] {
		return nil, ErrExists
	}
	var best *disk
	for _, d := range s.disks {
		if free := d.MaxVolumes - d.count; free > 0 && (best == nil || free > best.MaxVolumes-best.count) {
			best = d
		}
	}
	if best == nil {
		return nil, ErrNoSlot
	}
	best.count++
	if s.importing == nil {
		s.importing = map[uint32]bool{}
	}
	s.importing[id] = true
	return best, nil
}

func (s *Store) releaseSlot(id uint32, d *disk) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d.count--
	delete(s.importing, id)
}

// Configure changes volume id's replication code.
func (s *Store) Configure(id uint32, code replication.Code) error {
	v, err := s.get(id)
	if err != nil {
		return err
	}
	if err := v.SetReplication(code); err != nil {
		return fmt.Errorf("store: configure %d: %w", id, err)
	}
	s.notify()
	return nil
}

// appender adapts a vfs.File to io.Writer by appending.
type appender struct {
	f interface {
		WriteAt([]byte, int64) (int, error)
	}
	off int64
}

func (a *appender) Write(p []byte) (int, error) {
	n, err := a.f.WriteAt(p, a.off)
	a.off += int64(n)
	return n, err
}
