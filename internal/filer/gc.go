package filer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"time"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/filer/store"
)

const (
	gcBatch   = 256
	gcWorkers = 8
)

// garbageChunks queues cs for deletion in the current transaction. They
// stay readable for Config.GCDelay: a read that opened the old entry just
// before this change still finds every chunk it was given.
func (t *txn) garbageChunks(cs []chunk.Chunk) error {
	return t.queueGarbage(cs, t.now)
}

// queueGarbage queues cs as if dropped at the time given; the zero time
// makes them due at once (blobs no reader was ever given).
func (t *txn) queueGarbage(cs []chunk.Chunk, at time.Time) error {
	for _, c := range cs {
		if c.FID == "" {
			continue
		}
		if err := t.tx.Put(gcKey(at, c.FID), gcRecord(c.Manifest, c.CipherKey)); err != nil {
			return err
		}
		t.garbage++
	}
	return nil
}

// gcKey orders the queue by the time a blob was dropped, so that the
// collector reads the due records and stops at the first one still in its
// grace period.
func gcKey(at time.Time, fid string) []byte {
	k := make([]byte, 0, 9+len(fid))
	k = append(k, prefixGCQueue)
	k = binary.BigEndian.AppendUint64(k, gcStamp(at))
	return append(k, fid...)
}

func gcStamp(at time.Time) uint64 {
	if at.IsZero() || at.UnixNano() < 0 {
		return 0
	}
	return uint64(at.UnixNano())
}

// gcRecord is flags (bit 0: manifest) and, for a sealed manifest, its key:
// the collector must open it to queue the chunks it lists.
func gcRecord(manifest bool, key []byte) []byte {
	b := make([]byte, 1, 1+len(key))
	if manifest {
		b[0] = 1
		b = append(b, key...)
	}
	return b
}

// garbage is one queued blob as the collector reads it.
type garbage struct {
	key      []byte // its record's key
	fid      string
	manifest bool
	cipher   []byte    // a sealed manifest's key
	dropped  time.Time // when it was queued; its chunks inherit it
}

// dueGarbage reads up to limit records whose grace period is over: first
// those of the unordered queue older filers wrote ("g" + fid, all due),
// then the time-ordered queue up to now - GCDelay.
func (f *Filer) dueGarbage(ctx context.Context, limit int) ([]garbage, error) {
	var due []garbage
	legacy := []byte{prefixGCLegacy}
	err := f.st.Scan(ctx, legacy, store.PrefixEnd(legacy), limit, func(k, v []byte) error {
		g := garbage{key: bytes.Clone(k), fid: string(k[1:]), manifest: len(v) > 0 && v[0]&1 != 0}
		if g.manifest && len(v) > 9 {
			g.cipher = bytes.Clone(v[9:])
		}
		due = append(due, g)
		return nil
	})
	if err != nil || len(due) == limit {
		return due, err
	}
	start := []byte{prefixGCQueue}
	end := binary.BigEndian.AppendUint64([]byte{prefixGCQueue}, gcStamp(f.now().Add(-f.cfg.GCDelay))+1)
	err = f.st.Scan(ctx, start, end, limit-len(due), func(k, v []byte) error {
		if len(k) < 10 {
			return nil // not a record this code wrote; leave it
		}
		g := garbage{key: bytes.Clone(k), fid: string(k[9:]), manifest: len(v) > 0 && v[0]&1 != 0,
			dropped: time.Unix(0, int64(binary.BigEndian.Uint64(k[1:9])))}
		if g.manifest && len(v) > 1 {
			g.cipher = bytes.Clone(v[1:])
		}
		due = append(due, g)
		return nil
	})
	return due, err
}

// discard queues chunks uploaded for a write that did not commit. It runs
// even when ctx was cancelled: that is usually why the write failed. No
// reader was given them, so they are due at once.
func (f *Filer) discard(ctx context.Context, cs []chunk.Chunk) {
	if len(cs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := f.update(ctx, func(t *txn) error { return t.queueGarbage(cs, time.Time{}) }); err != nil {
		f.log.Warn("filer: could not queue chunks of a failed write; they leak", "chunks", len(cs), "err", err)
	}
}

func (f *Filer) kickGC() {
	select {
	case f.gcKick <- struct{}{}:
	default:
	}
}

func (f *Filer) gcLoop(ctx context.Context) {
	tick := time.NewTicker(f.cfg.GCInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.gcKick:
		case <-tick.C:
		}
		if _, err := f.CollectGarbage(ctx); err != nil && ctx.Err() == nil {
			f.log.Warn("filer: garbage collection", "err", err)
		}
	}
}

// CollectGarbage deletes the queued blobs that are due now, until none is
// left or a whole batch failed (those stay queued for the next round), and
// returns how many records it cleared. The background worker calls it;
// tests and tools may too.
func (f *Filer) CollectGarbage(ctx context.Context) (int, error) {
	total := 0
	for {
		batch, err := f.dueGarbage(ctx, gcBatch)
		if err == nil && len(batch) > 0 {
			// A queued blob may come from a commit that is visible but not
			// yet durable; deleting the blob cannot be undone if a power cut
			// then loses that commit (the file would be back without its data).
			err = f.durableUnhurried(ctx)
		}
		if err != nil || len(batch) == 0 {
			return total, storeErr(err)
		}
		var (
			mu      sync.Mutex
			done    [][]byte
			lastErr error
			wg      sync.WaitGroup
			sem     = make(chan struct{}, gcWorkers)
		)
		for _, g := range batch {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				err := f.deleteBlob(ctx, g)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					lastErr = err
					return
				}
				done = append(done, g.key)
			}()
		}
		wg.Wait()
		if len(done) > 0 {
			err := f.st.Update(ctx, func(tx store.Tx) error {
				for _, k := range done {
					if err := tx.Delete(k); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return total, storeErr(err)
			}
			total += len(done)
		}
		if len(done) < len(batch) {
			f.log.Debug("filer: some garbage blobs could not be deleted; retrying later", "failed", len(batch)-len(done), "err", lastErr)
			return total, nil
		}
	}
}

// deleteBlob deletes one queued blob; a manifest's chunks are queued
// first (as due as the manifest) so that none is forgotten if the process
// stops half-way.
func (f *Filer) deleteBlob(ctx context.Context, g garbage) error {
	if g.manifest {
		cs, err := chunk.ReadManifest(ctx, f.blobs, chunk.Chunk{FID: g.fid, Manifest: true, CipherKey: g.cipher})
		switch {
		case errors.Is(err, chunk.ErrNotFound):
			return nil // deleted earlier, after its chunks were queued
		case err != nil:
			return err
		}
		if err := f.update(ctx, func(t *txn) error { return t.queueGarbage(cs, g.dropped) }); err != nil {
			return err
		}
	}
	err := f.blobs.Delete(ctx, g.fid)
	if errors.Is(err, chunk.ErrNotFound) {
		return nil
	}
	return err
}

// PendingGarbage counts the queued blobs (for tests and status pages).
func (f *Filer) PendingGarbage(ctx context.Context) (int, error) {
	n := 0
	for _, p := range []byte{prefixGCLegacy, prefixGCQueue} {
		start := []byte{p}
		err := f.st.Scan(ctx, start, store.PrefixEnd(start), 0, func(k, v []byte) error {
			n++
			return nil
		})
		if err != nil {
			return n, storeErr(err)
		}
	}
	return n, nil
}
