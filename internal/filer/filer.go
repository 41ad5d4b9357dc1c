package filer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/crtime"
	"github.com/kelpfs/kelp/internal/filer/store"
)

// Config configures a Filer. Store and Blobs are required.
type Config struct {
	Store store.Store // not closed by Filer.Close: the caller owns it
	Blobs chunk.Blobs
	// ChunkSize is the size of the chunks files are cut into; 0 means
	// chunk.DefaultChunkSize (8 MiB).
	ChunkSize int
	// Concurrency is how many chunks of one write upload at once; 0 means
	// chunk.DefaultConcurrency.
	Concurrency int
	// ManifestThreshold is how many plain chunks an entry may hold before
	// runs of ManifestBatch of them are moved into manifest blobs; 0 means
	// 1000 for both (an 8 GiB file at the default chunk size).
	ManifestThreshold int
	ManifestBatch     int
	// PollInterval is how often a caught-up subscriber checks the store for
	// events written by other filers; 0 means 200ms.
	PollInterval time.Duration
	// GCInterval is how often the garbage worker looks at the queue when
	// nothing woke it; 0 means 10s.
	GCInterval time.Duration
	// GCDelay is how long the chunks of a replaced or deleted file stay
	// on the volume servers: a read that opened the old entry (an S3 GET
	// streaming a large object while it is overwritten) finishes with the
	// bytes it started on. 0 means one minute; negative means none.
	GCDelay time.Duration
	// EventRetention is how long events stay in the metadata log; older
	// ones are deleted in the background. 0 keeps them forever.
	EventRetention time.Duration
	// EncryptData seals every chunk this filer writes under a random
	// AES-256-GCM key of its own, kept only in the entry (encryption at
	// rest). Chunks that carry a key are decrypted whatever this says.
	EncryptData bool
	Logger      *slog.Logger
	Now         func() time.Time // nil means time.Now
}

// Filer is the namespace over one metadata store and one blob layer. It is
// safe for concurrent use; several Filers (in one process or many) may
// share a store.
type Filer struct {
	cfg   Config
	st    store.Store
	blobs chunk.Blobs
	log   *slog.Logger
	now   func() time.Time

	mu      sync.Mutex
	changed chan struct{} // closed and replaced after each commit that logged events

	gcKick chan struct{}
	cancel context.CancelFunc
	done   chan struct{} // closed when the background workers have stopped
	closed sync.Once
}

// New returns a Filer and starts its garbage worker; Close stops it.
func New(cfg Config) (*Filer, error) {
	if cfg.Store == nil || cfg.Blobs == nil {
		return nil, errors.New("filer: Config needs Store and Blobs")
	}
	if cfg.ChunkSize <= 0 {
		cfg.ChunkSize = chunk.DefaultChunkSize
	}
	if cfg.ManifestThreshold <= 0 {
		cfg.ManifestThreshold = 1000
	}
	if cfg.ManifestBatch <= 1 {
		cfg.ManifestBatch = 1000
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 200 * time.Millisecond
	}
	if cfg.GCInterval <= 0 {
		cfg.GCInterval = 10 * time.Second
	}
	switch {
	case cfg.GCDelay == 0:
		cfg.GCDelay = time.Minute
	case cfg.GCDelay < 0:
		cfg.GCDelay = 0
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Filer{
		cfg: cfg, st: cfg.Store, blobs: cfg.Blobs, log: cfg.Logger, now: cfg.Now,
		changed: make(chan struct{}),
		gcKick:  make(chan struct{}, 1),
		cancel:  cancel,
		done:    make(chan struct{}),
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		f.gcLoop(ctx)
	}()
	if cfg.EventRetention > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.retentionLoop(ctx)
		}()
	}
	go func() {
		wg.Wait()
		close(f.done)
	}()
	f.kickGC() // drain what a previous run left queued
	return f, nil
}

// Close stops the garbage worker. It does not close the store.
func (f *Filer) Close() error {
	f.closed.Do(func() {
		f.cancel()
		<-f.done
	})
	return nil
}

// ChunkSize is the configured chunk size.
func (f *Filer) ChunkSize() int { return f.cfg.ChunkSize }

// Blobs is the blob layer, for readers of chunks.
func (f *Filer) Blobs() chunk.Blobs { return f.blobs }

// EncryptData reports whether chunks written through this filer are sealed
// (Config.EncryptData).
func (f *Filer) EncryptData() bool { return f.cfg.EncryptData }

// txn is the state of one store transaction of a filer operation. Update
// may run fn more than once, so a txn is made afresh for each attempt.
type txn struct {
	f       *Filer
	tx      store.Tx // q, which keeps the quota counters
	q       *quotaTx
	now     time.Time
	events  int
	garbage int
}

// update runs fn in a store transaction and, after the commit, wakes
// subscribers and the garbage worker when fn logged events or garbage.
func (f *Filer) update(ctx context.Context, fn func(t *txn) error) error {
	var t *txn
	err := f.st.Update(ctx, func(tx store.Tx) error {
		q := &quotaTx{Tx: tx}
		t = &txn{f: f, tx: q, q: q, now: f.now()}
		if err := fn(t); err != nil {
			return err
		}
		return q.finish()
	})
	if err != nil {
		return storeErr(err)
	}
	if t.events > 0 {
		f.notify()
	}
	if t.garbage > 0 {
		f.kickGC()
	}
	return nil
}

// durable returns once every commit visible now is durable: an empty
// Update promises that (see package store). Call it between reading
// something and acting on it in a way a power cut cannot undo.
func (f *Filer) durable(ctx context.Context) error {
	return f.st.Update(ctx, func(store.Tx) error { return nil })
}

// durableUnhurried is durable for a caller nobody waits on (the event
// stream, the garbage collector): it waits for the store's next deferred
// sync, milliseconds away, instead of forcing one of its own.
func (f *Filer) durableUnhurried(ctx context.Context) error {
	return f.durable(store.WithUnhurriedDurability(ctx))
}

// Sync returns once every change committed so far through this filer's
// store (by any filer sharing it), including those committed under
// store.WithDeferredDurability, is durable.
func (f *Filer) Sync(ctx context.Context) error {
	return storeErr(f.durable(ctx))
}

// storeErr keeps filer errors as they are and marks the others as coming
// from the store.
func storeErr(err error) error {
	if err == nil {
		return nil
	}
	for _, e := range []error{ErrNotFound, ErrExists, ErrNotDir, ErrIsDir, ErrNotEmpty, ErrInvalidPath, ErrInvalid, ErrCorrupt, ErrEventsTrimmed, ErrQuotaExceeded} {
		if errors.Is(err, e) {
			return err
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrStore, err)
}

func (f *Filer) notify() {
	f.mu.Lock()
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

func (f *Filer) changedChan() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// get reads the entry at clean path p.
func (t *txn) get(p string) (*Entry, error) {
	return getEntry(t.tx, p)
}

func getEntry(r store.ReadTx, p string) (*Entry, error) {
	v, err := r.Get(entryKey(p))
	if errors.Is(err, store.ErrNotFound) {
		return absentEntry(p)
	}
	if err != nil {
		return nil, err
	}
	return decodeEntry(p, v)
}

func (t *txn) put(e *Entry) error {
	return t.tx.Put(entryKey(e.Path), encodeEntry(e))
}

func (t *txn) log(typ EventType, old, new *Entry) error {
	seq, err := store.NextSeq(t.tx, seqKey)
	if err != nil {
		return err
	}
	t.events++
	ev := &Event{Seq: seq, Type: typ, Time: t.now, Old: old, New: new}
	return t.tx.Put(store.SeqKey([]byte{prefixEvent}, seq), encodeEvent(ev))
}

// mkdirs makes sure clean directory path dir exists, creating missing
// directories (and logging their creation), and returns its entry.
func (t *txn) mkdirs(dir string) (*Entry, error) {
	e, err := t.get(dir)
	switch {
	case err == nil:
		if !e.IsDir() {
			return nil, fmt.Errorf("%w: %s", ErrNotDir, dir)
		}
		return e, nil
	case !errors.Is(err, ErrNotFound):
		return nil, err
	}
	parent, _ := SplitPath(dir)
	pe, err := t.mkdirs(parent)
	if err != nil {
		return nil, err
	}
	d := &Entry{Path: dir, Mode: os.ModeDir | 0o755, Mtime: t.now, Ctime: t.now, Crtime: crtime.Unique(t.now)}
	if err := t.put(d); err != nil {
		return nil, err
	}
	if err := t.log(EventCreate, nil, d); err != nil {
		return nil, err
	}
	return d, t.namesChanged(pe)
}

// dirTimesResolution is how far behind a change of its names a
// directory's mtime and ctime may be. The filer rewrites a directory's
// entry for such a change only when one of its times is older than this:
// the creates of many clients in one directory (S3 PUTs under one prefix,
// an untar through a mount) then do not all write that one entry, which
// the PostgreSQL and Redis stores would serialize; at most one transaction
// per second does.
const dirTimesResolution = time.Second

// namesChanged records that a name was added to or removed from directory
// d (its entry as this operation read it): its mtime and ctime become now
// (POSIX), to within dirTimesResolution. Not the root's: they move only
// when set (UpdateEntry, SetAttributes), so that the names made at the top
// level do not add an update of "/" to the event log every second.
func (t *txn) namesChanged(d *Entry) error {
	if d.Path == "/" {
		return nil
	}
	recent := func(at time.Time) bool { return !at.After(t.now) && t.now.Sub(at) < dirTimesResolution }
	if recent(d.Mtime) && recent(d.Ctime) {
		return nil
	}
	nd := d.Clone()
	nd.Mtime, nd.Ctime = t.now, t.now
	if err := t.put(nd); err != nil {
		return err
	}
	return t.log(EventUpdate, d, nd)
}

// namesChangedIn is namesChanged for directory dir, read here.
func (t *txn) namesChangedIn(dir string) error {
	d, err := t.get(dir)
	if errors.Is(err, ErrNotFound) {
		return nil // removed in this transaction (a recursive delete)
	}
	if err != nil {
		return err
	}
	return t.namesChanged(d)
}

// walkTree calls fn for every entry below directory dir (not dir itself):
// for a directory other than the root, children first in name order, then
// deeper entries in key order.
func walkTree(r store.ReadTx, dir string, fn func(k, v []byte) error) error {
	prefixes := [][]byte{childPrefix(dir), deepPrefix(dir)}
	if dir == "/" {
		prefixes = [][]byte{{prefixEntry}} // every entry is below the root
	}
	for _, p := range prefixes {
		if err := r.Scan(p, store.PrefixEnd(p), 0, fn); err != nil {
			return err
		}
	}
	return nil
}

// hasChildren reports whether directory dir has an entry.
func hasChildren(r store.ReadTx, dir string) (bool, error) {
	p := childPrefix(dir)
	found := false
	err := r.Scan(p, store.PrefixEnd(p), 1, func(k, v []byte) error {
		found = true
		return store.ErrStopScan
	})
	return found, err
}
