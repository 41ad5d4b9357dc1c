package filer

import (
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

// garbageChunks queues cs for deletion in the current transaction.
func (t *txn) garbageChunks(cs []chunk.Chunk) error {
	for _, c := range cs {
		if c.FID == "" {
			continue
		}
		if err := t.tx.Put(gcKey(c.FID), gcRecord(c.Manifest, c.CipherKey, t.now)); err != nil {
			return err
		}
		t.garbage++
	}
	return nil
}

func gcKey(fid string) []byte { return append([]byte{prefixGC}, fid...) }

// gcRecord is flags (bit 0: manifest), the time queued (8 bytes BE) and,
// for a sealed manifest, its key: the collector must open it to queue the
// chunks it lists.
func gcRecord(manifest bool, key []byte, now time.Time) []byte {
	b := make([]byte, 1, 9+len(key))
	if manifest {
		b[0] = 1
	}
	b = binary.BigEndian.AppendUint64(b, uint64(now.UnixNano()))
	if manifest {
		b = append(b, key...)
	}
	return b
}

// discard queues chunks uploaded for a write that did not commit. It runs
// even when ctx was cancelled: that is usually why the write failed.
func (f *Filer) discard(ctx context.Context, cs []chunk.Chunk) {
	if len(cs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := f.update(ctx, func(t *txn) error { return t.garbageChunks(cs) }); err != nil {
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

// CollectGarbage deletes the queued blobs now, until the queue is empty or
// a whole batch failed (those stay queued for the next round), and returns
// how many records it cleared. The background worker calls it; tests and
// tools may too.
func (f *Filer) CollectGarbage(ctx context.Context) (int, error) {
	total := 0
	for {
		type item struct {
			fid      string
			manifest bool
			key      []byte
		}
		var batch []item
		start := []byte{prefixGC}
		err := f.st.Scan(ctx, start, store.PrefixEnd(start), gcBatch, func(k, v []byte) error {
			it := item{fid: string(k[1:]), manifest: len(v) > 0 && v[0]&1 != 0}
			if it.manifest && len(v) > 9 {
				it.key = append([]byte(nil), v[9:]...)
			}
			batch = append(batch, it)
			return nil
		})
		if err == nil && len(batch) > 0 {
			// A queued blob may come from a commit that is visible but not
			// yet durable; deleting the blob cannot be undone if a power cut
			// then loses that commit (the file would be back without its data).
			err = f.durable(ctx)
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
		for _, it := range batch {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				err := f.deleteBlob(ctx, it.fid, it.manifest, it.key)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					lastErr = err
					return
				}
				done = append(done, gcKey(it.fid))
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
// first so that none is forgotten if the process stops half-way.
func (f *Filer) deleteBlob(ctx context.Context, fid string, manifest bool, key []byte) error {
	if manifest {
		cs, err := chunk.ReadManifest(ctx, f.blobs, chunk.Chunk{FID: fid, Manifest: true, CipherKey: key})
		switch {
		case errors.Is(err, chunk.ErrNotFound):
			return nil // deleted earlier, after its chunks were queued
		case err != nil:
			return err
		}
		if err := f.update(ctx, func(t *txn) error { return t.garbageChunks(cs) }); err != nil {
			return err
		}
	}
	err := f.blobs.Delete(ctx, fid)
	if errors.Is(err, chunk.ErrNotFound) {
		return nil
	}
	return err
}

// PendingGarbage counts the queued blobs (for tests and status pages).
func (f *Filer) PendingGarbage(ctx context.Context) (int, error) {
	n := 0
	start := []byte{prefixGC}
	err := f.st.Scan(ctx, start, store.PrefixEnd(start), 0, func(k, v []byte) error {
		n++
		return nil
	})
	return n, storeErr(err)
}
