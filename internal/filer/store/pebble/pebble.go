package pebble

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kelpfs/kelp/internal/filer/store"
	"github.com/kelpfs/kelp/internal/filer/store/internal/gate"
)

// Options tune the database. The zero value (or nil) is the default.
type Options struct {
	// CacheSize is the block cache in bytes; default 32 MiB. It fills only as
	// blocks are read, so it costs an idle server nothing, and without it
	// every lookup of a cold directory entry decodes sstable blocks again.
	CacheSize int64
	// MemTableSize is the size of one memtable in bytes; default 8 MiB.
	// Up to two are held in memory.
	MemTableSize uint64
	// NoSync commits without waiting for fsync: a crash may lose the last
	// transactions (never part of one). For tests and benchmarks.
	NoSync bool
	// DeferredSyncDelay is how long after a deferred Update (see
	// store.WithDeferredDurability) its WAL sync may wait, to be shared with
	// the deferred Updates applied meanwhile; default 20 ms.
	DeferredSyncDelay time.Duration
	// Logger receives Pebble's log lines; nil discards them.
	Logger *slog.Logger

	// FS replaces the operating system's file system; tests pass one that can
	// stall or crash. Nil means the OS's.
	FS vfs.FS
}

// Store is a store.Store on a Pebble database.
type Store struct {
	db        *cpebble.DB
	writeOpts *cpebble.WriteOptions
	writer    sync.Mutex // serialises Update: see the package comment
	gate      gate.Gate
	unsynced  atomic.Int64 // batches applied whose WAL sync has not returned
	// ownUnsynced counts those of them that sync themselves (not deferred).
	ownUnsynced atomic.Int64
	syncWaits   atomic.Int32 // no-op Updates waiting for others' syncs (tests)
	// deferredErrs counts WAL syncs of deferred Updates that failed.
	deferredErrs atomic.Int64
	lazy         lazySync // syncs deferred Updates a moment after they apply
}

var _ store.Store = (*Store)(nil)

// Open opens or creates the database in dir.
func Open(dir string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.CacheSize <= 0 {
		o.CacheSize = 32 << 20
	}
	if o.DeferredSyncDelay <= 0 {
		o.DeferredSyncDelay = defaultDeferredSyncDelay
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = 8 << 20
	}
	po := &cpebble.Options{
		CacheSize:          o.CacheSize,
		MemTableSize:       o.MemTableSize,
		FormatMajorVersion: cpebble.FormatNewest,
		Logger:             logger{o.Logger},
		// The filer holds few files open; Pebble's default of 1000 table
		// handles each pins index blocks.
		MaxOpenFiles: 256,
		FS:           o.FS,
	}
	db, err := cpebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("pebble: open %s: %w", dir, err)
	}
	wo := cpebble.Sync
	if o.NoSync {
		wo = cpebble.NoSync
	}
	s := &Store{db: db, writeOpts: wo}
	s.lazy = lazySync{s: s, delay: o.DeferredSyncDelay}
	return s, nil
}

// reader is what Get and Scan need; a DB, a Snapshot and an indexed Batch
// all provide it.
type reader interface {
	Get(key []byte) ([]byte, io.Closer, error)
	NewIterWithContext(ctx context.Context, o *cpebble.IterOptions) (*cpebble.Iterator, error)
}

func get(r reader, key []byte) ([]byte, error) {
	if err := store.CheckKey(key); err != nil {
		return nil, err
	}
	v, closer, err := r.Get(key)
	if errors.Is(err, cpebble.ErrNotFound) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("pebble: get: %w", err)
	}
	out := append([]byte{}, v...) // Pebble's slice is valid only until Close
	closer.Close()
	return out, nil
}

func scan(ctx context.Context, r reader, start, end []byte, limit int, fn store.ScanFunc) error {
	if store.EmptyRange(start, end) {
		return ctx.Err()
	}
	if len(start) == 0 {
		// No key sorts before the empty key; a nil bound also spares
		// Pebble a seek (and its invariant builds index start[0]).
		start = nil
	}
	it, err := r.NewIterWithContext(ctx, &cpebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return fmt.Errorf("pebble: scan: %w", err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if err := ctx.Err(); err != nil {
			it.Close()
			return err
		}
		if limit > 0 && n == limit {
			break
		}
		n++
		v, err := it.ValueAndErr()
		if err == nil {
			err = fn(it.Key(), v)
		}
		if err != nil {
			it.Close()
			if errors.Is(err, store.ErrStopScan) {
				return nil
			}
			return err
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("pebble: scan: %w", err)
	}
	return nil
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key []byte) ([]byte, error) {
	if err := s.gate.Enter(); err != nil {
		return nil, err
	}
	defer s.gate.Leave()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return get(s.db, key)
}

// Scan implements store.Store. It reads one consistent snapshot.
func (s *Store) Scan(ctx context.Context, start, end []byte, limit int, fn store.ScanFunc) error {
	if err := s.gate.Enter(); err != nil {
		return err
	}
	defer s.gate.Leave()
	if err := ctx.Err(); err != nil {
		return err
	}
	return scan(ctx, s.db, start, end, limit, fn)
}

// View implements store.Store over a Pebble snapshot; fn runs once.
func (s *Store) View(ctx context.Context, fn func(tx store.ReadTx) error) error {
	if err := s.gate.Enter(); err != nil {
		return err
	}
	defer s.gate.Leave()
	if err := ctx.Err(); err != nil {
		return err
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	tx := &tx{ctx: ctx, r: snap}
	defer tx.finish()
	return fn(tx)
}

// Update implements store.Store; fn runs once (there are no conflicts).
func (s *Store) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	if err := s.gate.Enter(); err != nil {
		return err
	}
	defer s.gate.Leave()
	if err := ctx.Err(); err != nil {
		return err
	}
	b := s.db.NewIndexedBatch()
	defer b.Close()
	a, err := s.apply(ctx, b, fn)
	if err != nil {
		return err
	}
	// Wait for the WAL sync outside the writer lock, so that concurrent
	// transactions share one fsync (group commit) instead of queueing on it.
	switch a.wait {
	case waitOwn:
		err = b.SyncWait()
		s.ownUnsynced.Add(-1)
		s.unsynced.Add(-1)
	case waitOthers:
		// fn wrote nothing, but its success vouches for what it read, which
		// may be a commit still waiting for its fsync (a retried create that
		// finds its first attempt's entry). A synced empty log record is
		// durable only once everything before it in the WAL is.
		s.syncWaits.Add(1)
		err = s.db.LogData(nil, cpebble.Sync)
		s.syncWaits.Add(-1)
	case waitLazy:
		// The same, without hurrying the deferred batches' sync: wait for
		// it, and sync now only if a batch that syncs itself is in flight.
		s.syncWaits.Add(1)
		err = a.round.wait(ctx)
		if err == nil && a.own {
			err = s.db.LogData(nil, cpebble.Sync)
		}
		s.syncWaits.Add(-1)
	}
	if err != nil {
		return fmt.Errorf("pebble: commit: %w", err)
	}
	return nil
}

// syncWait says what an applied Update must wait for before it answers.
type syncWait int

const (
	waitNone   syncWait = iota // durable already, deferred, or NoSync
	waitOwn                    // its own batch's WAL sync
	waitOthers                 // the syncs of batches it may have read
	waitLazy                   // the same, unhurried (store.WithUnhurriedDurability)
)

// applied is what apply hands back to Update.
type applied struct {
	wait  syncWait
	round *lazyRound // waitLazy: the deferred batches' sync to wait for
	own   bool       // waitLazy: a batch syncing itself may have been read
}

// apply runs fn and applies its batch while holding the writer lock, which
// is what makes transactions serialisable. It reports what the caller must
// wait for before answering.
func (s *Store) apply(ctx context.Context, b *cpebble.Batch, fn func(tx store.Tx) error) (applied, error) {
	s.writer.Lock()
	defer s.writer.Unlock()
	t := &tx{ctx: ctx, r: b, b: b}
	err := fn(t)
	t.finish()
	if err != nil {
		return applied{}, err
	}
	if err := ctx.Err(); err != nil {
		return applied{}, err
	}
	switch {
	case !s.writeOpts.Sync:
		if !b.Empty() {
			if err := b.Commit(s.writeOpts); err != nil {
				return applied{}, fmt.Errorf("pebble: commit: %w", err)
			}
		}
		return applied{}, nil
	case b.Empty():
		// Counted under the writer lock: every batch fn could have read
		// was counted before it was applied.
		if s.unsynced.Load() == 0 {
			return applied{}, nil
		}
		if store.UnhurriedDurability(ctx) {
			return applied{wait: waitLazy, round: s.lazy.current(), own: s.ownUnsynced.Load() > 0}, nil
		}
		return applied{wait: waitOthers}, nil
	case store.DeferredDurability(ctx):
		// Applied without a sync of its own: lazySync covers it a moment
		// later, and every empty Update meanwhile waits for that (unsynced).
		s.unsynced.Add(1)
		if err := b.Commit(cpebble.NoSync); err != nil {
			s.unsynced.Add(-1)
			return applied{}, fmt.Errorf("pebble: commit: %w", err)
		}
		s.lazy.add()
		return applied{}, nil
	}
	s.unsynced.Add(1)
	s.ownUnsynced.Add(1)
	if err := s.db.ApplyNoSyncWait(b, s.writeOpts); err != nil {
		s.unsynced.Add(-1)
		s.ownUnsynced.Add(-1)
		return applied{}, fmt.Errorf("pebble: commit: %w", err)
	}
	return applied{wait: waitOwn}, nil
}

// Close implements store.Store.
func (s *Store) Close() error {
	s.lazy.close()
	if !s.gate.Close() {
		return nil
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("pebble: close: %w", err)
	}
	return nil
}

// tx is a View (b nil) or Update transaction.
type tx struct {
	ctx  context.Context
	r    reader
	b    *cpebble.Batch
	done bool
}

func (t *tx) finish() { t.done = true }

func (t *tx) check() error {
	if t.done {
		return store.ErrTxDone
	}
	return t.ctx.Err()
}

func (t *tx) Get(key []byte) ([]byte, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	return get(t.r, key)
}

func (t *tx) Scan(start, end []byte, limit int, fn store.ScanFunc) error {
	if err := t.check(); err != nil {
		return err
	}
	return scan(t.ctx, t.r, start, end, limit, fn)
}

func (t *tx) Put(key, val []byte) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := store.CheckKey(key); err != nil {
		return err
	}
	if err := store.CheckValue(val); err != nil {
		return err
	}
	return t.b.Set(key, val, nil) // the batch copies key and val
}

func (t *tx) Delete(key []byte) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := store.CheckKey(key); err != nil {
		return err
	}
	return t.b.Delete(key, nil)
}

// logger adapts slog to Pebble's printf-style logger.
type logger struct{ l *slog.Logger }

func (l logger) Infof(format string, args ...any) {
	if l.l != nil {
		l.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

func (l logger) Errorf(format string, args ...any) {
	if l.l != nil {
		l.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

// Fatalf is called on broken invariants (corruption); Pebble expects it
// not to return.
func (l logger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if l.l != nil {
		l.l.Error(msg, "component", "pebble")
	}
	panic("pebble: fatal: " + msg)
}
