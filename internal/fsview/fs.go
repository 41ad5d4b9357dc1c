package fsview

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/pb"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// Config describes a view of one filer.
type Config struct {
	// Filer is the filer's gRPC address (host:port); see FilerGRPCAddr.
	Filer string
	// Root is the filer directory shown as "/" (default "/"); it must exist.
	Root string
	// Collection and Replication of the chunks written ("": the filer's).
	Collection  string
	Replication string
	// ChunkSize is the size of the chunks written; 0 takes the filer's.
	ChunkSize int
	// ConnectTimeout bounds the first contact with the filer (default 10s).
	ConnectTimeout time.Duration
	// HTTPClient carries chunk reads and writes to the volume servers.
	HTTPClient *http.Client
	Logger     *slog.Logger
	// CacheDir, if set, keeps the chunks read in files there, at most
	// CacheSize bytes of them (least recently used evicted first); what is
	// there from an earlier run is used.
	CacheDir  string
	CacheSize int64
	// DeferDurability lets creates (open O_CREAT, mkdir, symlink, mknod)
	// and background commits after close answer before the filer's store
	// has synced them (the filer syncs them within milliseconds); fsync,
	// fdatasync, Sync and Close then ask the filer to Sync. POSIX makes
	// fsync the durability point; the FUSE mount sets it.
	DeferDurability bool
	// AsyncCreate lets a create of a name this view knows absent (its
	// directory's listing is complete and kept fresh by the metadata events,
	// see IsCachedAbsence) answer before the filer has made the entry: the
	// CreateEntry is held for the file's first commit, which sends it with
	// the file's data (or alone after createHold), and every other change
	// of the namespace (and a listing) sends the creates held and waits for
	// the creates on their way. A create the filer refuses (another
	// client made the name meanwhile, a quota) fails the file's commit: its
	// data is lost and the next flush or fsync says so. The FUSE mount sets it.
	AsyncCreate bool
	// AccessToken is shown to the filer and the masters when they need
	// authentication (docs/security.md); "" none.
	AccessToken string
}

// FS is a POSIX view of a filer directory. All paths given to it are
// absolute within the view ("/a/b"); "/" is Config.Root.
type FS struct {
	cfg       Config
	log       *slog.Logger
	conn      *grpc.ClientConn
	filer     filerpb.FilerClient
	blobs     *clusterBlobs
	putter    chunk.Putter // where chunks are uploaded: blobs (a test puts a gate in between)
	reader    chunk.Opener // blobs, or through the chunk cache
	chunks    *chunkCache  // nil: no local chunk cache
	chunkSize int
	encrypt   bool                // seal the chunks written (the filer's --encrypt-data, from GetConfiguration)
	uploads   *semaphore.Weighted // bounds the chunk uploads in flight (uploadWeight)
	workers   *workers            // run the background tasks (workers.go)
	commits   chan struct{}       // bounds background commits (releaseLater)

	mu    sync.Mutex
	files map[string]*file // open files by content path (filer path)
	// forgets counts removals from files: an entry looked up before one may
	// predate that file's last commit (see acquireEntry).
	forgets uint64

	cache      *metaCache
	touches    dirTouches // changes of names made here, for directories' times
	stopFollow context.CancelFunc
	followDone chan struct{}

	calls atomic.Int64 // unary calls to the filer (Stats.FilerCalls)
	// readMisses counts the reads of committed content that found nothing
	// buffered or on its way and fetched for themselves (Stats.ReadMisses).
	readMisses atomic.Int64
	// specHits and specMisses count the fetches started from a cached entry
	// at an open (OpenForReading) that were kept (the filer's entry had the
	// same content) and dropped (Stats.SpecHits, SpecMisses).
	specHits, specMisses atomic.Int64

	// Creates on their way (Config.AsyncCreate), and the slots bounding them.
	createMu    sync.Mutex
	creating    map[*asyncCreate]struct{}
	createSlots chan struct{}
	createHold  time.Duration // createHold; a test holds creates longer

	walk dirWalk // a directory's files read one after the other (spec.go)

	locks      lockSession             // advisory locks (locks.go)
	lastStatfs *filerpb.StatfsResponse // under mu
}

// maxUploadBytes bounds the chunk uploads in flight, each weighing
// uploadWeight: 8 whole chunks of 8 MiB, or 64 small ones. A count alone
// was wrong for one of the two: 8 uploads at a time kept a copy of 1 MiB
// files or an untar to 8 files in flight, each waiting out its volume
// server's unhurried sync (10 ms), so an untar of 4 KiB files ran at 680
// files/s whatever the CPU; 64 at a time it ran at 1,900.
const maxUploadBytes = 64 << 20

// uploadWeight is the share of maxUploadBytes an upload of n bytes takes:
// its size, at least 1 MiB, so that small uploads count as many, and at
// most all of it (a chunk size above 64 MiB uploads alone).
func uploadWeight(n int) int64 { return min(max(int64(n), 1<<20), maxUploadBytes) }

// maxBackgroundCommits bounds the files closed and committing in the
// background at once (their buffers stay in memory until committed).
const maxBackgroundCommits = 64

// Names longer than this fail with ENAMETOOLONG, as on local file systems.
const maxNameLen = 255

// hiddenDir holds what the view keeps for itself in the filer: the content
// of hard-linked files (links/) and files unlinked while open (unlinked/).
// It is not shown in the root directory's listing.
const hiddenDir = "/.kelp"

// FilerGRPCAddr is the gRPC address of a filer whose HTTP API is at
// hostport (Kelp's port convention, pb.GRPCAddress).
func FilerGRPCAddr(hostport string) (string, error) { return pb.GRPCAddress(hostport) }

// New connects to the filer and checks that the root exists. An
// unreachable filer is an error after cfg.ConnectTimeout, never a hang.
func New(ctx context.Context, cfg Config) (*FS, error) {
	if cfg.Root == "" {
		cfg.Root = "/"
	}
	cfg.Root = path.Clean("/" + cfg.Root)
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	opts := pb.DialOptions()
	if cfg.AccessToken != "" {
		opts = append(opts, auth.DialOption(auth.Static(cfg.AccessToken)))
	}
	fs := &FS{cfg: cfg, log: cfg.Logger,
		uploads: semaphore.NewWeighted(maxUploadBytes), workers: newWorkers(), commits: make(chan struct{}, maxBackgroundCommits), files: map[string]*file{}, cache: newMetaCache(),
		creating: map[*asyncCreate]struct{}{}, createSlots: make(chan struct{}, maxAsyncCreates), createHold: createHold}
	opts = append(opts, grpc.WithChainUnaryInterceptor(fs.countCall))
	conn, err := grpc.NewClient(cfg.Filer, opts...)
	if err != nil {
		return nil, fmt.Errorf("fsview: filer %s: %w", cfg.Filer, err)
	}
	fs.conn, fs.filer = conn, filerpb.NewFilerClient(conn)
	if err := fs.connect(ctx); err != nil {
		if fs.stopFollow != nil {
			fs.stopFollow()
			<-fs.followDone
		}
		conn.Close()
		return nil, err
	}
	return fs, nil
}

func (fs *FS) connect(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, fs.cfg.ConnectTimeout)
	defer cancel()
	conf, err := fs.filer.GetConfiguration(ctx, &filerpb.GetConfigurationRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("fsview: filer %s did not answer: %w", fs.cfg.Filer, err)
	}
	fctx, stop := context.WithCancel(context.Background())
	fs.stopFollow, fs.followDone = stop, make(chan struct{})
	go func() {
		defer close(fs.followDone)
		fs.follow(fctx, conf.LastSeq)
	}()
	if len(conf.Masters) == 0 {
		return fmt.Errorf("fsview: filer %s knows no master", fs.cfg.Filer)
	}
	// File ids come in blocks of 64: one assign round trip per 64 chunks.
	// A volume server on this host hands its files over for reads.
	c, err := client.New(client.Config{Masters: conf.Masters, HTTPClient: fs.cfg.HTTPClient, Logger: fs.log, AssignBatch: 64,
		AccessToken: auth.Static(fs.cfg.AccessToken), LocalReads: true})
	if err != nil {
		return fmt.Errorf("fsview: %w", err)
	}
	req := client.AssignRequest{Collection: conf.Collection, Replication: conf.Replication}
	if fs.cfg.Collection != "" {
		req.Collection = fs.cfg.Collection
	}
	if fs.cfg.Replication != "" {
		req.Replication = fs.cfg.Replication
	}
	fs.blobs = &clusterBlobs{c: c, req: req}
	fs.putter = fs.blobs
	fs.encrypt = conf.EncryptData
	fs.reader = fs.blobs
	if fs.cfg.CacheDir != "" {
		cc, err := openChunkCache(fs.cfg.CacheDir, fs.cfg.CacheSize)
		if err != nil {
			return err
		}
		fs.chunks = cc
		fs.reader = &cachedBlobs{inner: fs.blobs, c: cc}
	}
	fs.chunkSize = fs.cfg.ChunkSize
	if fs.chunkSize <= 0 {
		fs.chunkSize = int(conf.ChunkSize)
	}
	if fs.chunkSize <= 0 {
		fs.chunkSize = 8 << 20
	}
	root, err := fs.filer.LookupEntry(ctx, &filerpb.LookupEntryRequest{Path: fs.cfg.Root})
	if err != nil {
		return fmt.Errorf("fsview: root %s: %w", fs.cfg.Root, err)
	}
	if !root.Entry.IsDir {
		return fmt.Errorf("fsview: root %s is not a directory", fs.cfg.Root)
	}
	return nil
}

// Close flushes every open file and closes the connection.
func (fs *FS) Close() error {
	fs.mu.Lock()
	files := make([]*file, 0, len(fs.files))
	for _, f := range fs.files {
		files = append(files, f)
	}
	fs.mu.Unlock()
	var first error
	for _, f := range files {
		if err := f.flush(context.Background()); err != nil && first == nil {
			first = err
		}
	}
	for range cap(fs.commits) { // the background commits have ended
		fs.commits <- struct{}{}
	}
	for range cap(fs.commits) {
		<-fs.commits
	}
	fs.settle()
	if err := fs.syncFiler(context.Background()); err != nil && first == nil {
		first = err
	}
	fs.endLocks()
	if fs.stopFollow != nil {
		fs.stopFollow()
		<-fs.followDone
	}
	if fs.blobs != nil {
		fs.blobs.c.Close()
	}
	fs.workers.stop()
	if err := fs.conn.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

// ChunkSize is the size of the chunks this view writes.
func (fs *FS) ChunkSize() int { return fs.chunkSize }

// full maps a view path to the filer path.
func (fs *FS) full(p string) string {
	return path.Join(fs.cfg.Root, path.Clean("/"+p))
}

// checkName refuses names a local file system would.
func checkName(p string) error {
	name := path.Base(p)
	if len(name) > maxNameLen {
		return errnof(syscall.ENAMETOOLONG, "%s", name)
	}
	if strings.ContainsRune(name, 0) {
		return errnof(syscall.EINVAL, "name with NUL")
	}
	return nil
}

// isHidden reports whether view path p is (under) the hidden directory.
func (fs *FS) isHidden(full string) bool {
	return full == hiddenDir || strings.HasPrefix(full, hiddenDir+"/")
}

// PathIno is the inode number that path p alone would give (inoOf): for
// a caller that must number something by where it is (internal/fuse, for
// a directory whose own number loops back to an ancestor).
func PathIno(p string) uint64 { return inoOf(p) }

// inoOf numbers an inode by its identity: a hard-link group by its id,
// anything else by its filer path. The numbers are stable across mounts.
func inoOf(identity string) uint64 {
	if identity == "/" {
		return 1
	}
	h := fnv.New64a()
	io.WriteString(h, identity)
	n := h.Sum64()
	if n <= 1 {
		n += 2
	}
	return n
}

// lookupRaw returns the entry at filer path full, from the cache when it
// holds it.
func (fs *FS) lookupRaw(ctx context.Context, full string) (*filerpb.Entry, error) {
	e, _, err := fs.lookupCached(ctx, full)
	return e, err
}

// lookupCached is lookupRaw that also says whether the entry came from the
// metadata cache (and so may be older than a change another client made
// whose event has not arrived yet).
func (fs *FS) lookupCached(ctx context.Context, full string) (*filerpb.Entry, bool, error) {
	if e, ok := fs.cache.get(full); ok {
		return e, true, nil
	}
	if fs.cache.absent(full) {
		return nil, true, &absentError{full}
	}
	e, err := fs.lookupFresh(ctx, full)
	return e, false, err
}

// lookupFresh asks the filer for the entry at full, whatever the cache
// holds, and caches the answer.
func (fs *FS) lookupFresh(ctx context.Context, full string) (*filerpb.Entry, error) {
	gen := fs.cache.generation()
	fs.cache.rpcs.Add(1)
	r, err := fs.filer.LookupEntry(ctx, &filerpb.LookupEntryRequest{Path: full})
	if err != nil {
		return nil, err
	}
	fs.cache.put(gen, r.Entry)
	return r.Entry, nil
}

// The changes below evict what they touch from the cache, before and
// after: this view reads its own writes even before their events arrive.

type deferKey struct{}

// deferred marks ctx so that the creates and updates made under it ask the
// filer for deferred durability, if Config.DeferDurability allows.
func deferred(ctx context.Context) context.Context {
	return context.WithValue(ctx, deferKey{}, true)
}

func (fs *FS) deferring(ctx context.Context) bool {
	v, _ := ctx.Value(deferKey{}).(bool)
	return v && fs.cfg.DeferDurability
}

// syncFiler returns once every change committed in the filer so far, the
// deferred ones included, is durable (a no-op without DeferDurability:
// nothing was deferred).
func (fs *FS) syncFiler(ctx context.Context) error {
	if !fs.cfg.DeferDurability {
		return nil
	}
	_, err := fs.filer.Sync(ctx, &filerpb.SyncRequest{})
	return err
}

// Each change is also counted as this view's own (metaCache.beginOwn)
// until its event arrives: the names cached as absent are not trusted for
// it meanwhile.

// maxAsyncCreates bounds the creates sent alone at a time (Config.AsyncCreate;
// a create sent with its file's first commit counts as the commit).
const maxAsyncCreates = 64

// createHold is how long a create answered early waits to be sent with the
// file's first commit: a file written and closed at once (an untar, a
// copy of small files) is then made in the filer by one CreateEntry that
// carries its data, not a CreateEntry and an UpdateEntry. Past it the
// create is sent alone, as it is at once when anything else needs the
// name in the filer (waitCreate, settle).
const createHold = 50 * time.Millisecond

// asyncCreate is one create answered early (Config.AsyncCreate): its
// entry, held until the file's first commit claims it or it is sent alone;
// err is set before done is closed.
type asyncCreate struct {
	entry   *filerpb.Entry
	claimed atomic.Bool // sent: alone (sendCreate) or with the first commit (claim)
	done    chan struct{}
	err     error
}

// claim takes the create for whoever sends it: the file's first commit,
// with the committed entry, or sendCreate, alone; false if taken already.
func (c *asyncCreate) claim() bool { return c != nil && c.claimed.CompareAndSwap(false, true) }

// held reports whether the create is neither sent nor claimed: the file's
// first commit need not wait for it.
func (c *asyncCreate) held() bool { return c != nil && !c.claimed.Load() }

// refused reports whether c is done and the filer refused it.
func (c *asyncCreate) refused() bool {
	if c == nil {
		return false
	}
	select {
	case <-c.done:
		return c.err != nil
	default:
		return false
	}
}

// createAsync holds the exclusive create of e, the entry of a file just
// registered by acquireNew with c on its way, for the file's first commit
// to send with its data, or sends it alone after createHold. The caller
// has checked that the name is absent here (metaCache.absent). If the
// filer refuses, the file stops being the one open here under that name
// once c is done (fileAt): whoever waited for c (waitCreate, settle) then
// sees the filer's state of the name, and the file's handles the refusal
// (file.createFailure). Sending takes no lock a waiter for c may hold
// (hideOpen settles under fs.mu, a commit waits under f.mu).
func (fs *FS) createAsync(c *asyncCreate, e *filerpb.Entry) {
	c.entry = cloneEntry(e) // before settle can find c
	fs.createMu.Lock()
	fs.creating[c] = struct{}{}
	fs.createMu.Unlock()
	fs.cache.evict(e.Path)
	fs.cache.beginOwn(e.Path)
	fs.touches.namesChanged(e.Path) // answered now: the name is there for the caller
	time.AfterFunc(fs.createHold, func() { fs.sendCreate(c) })
}

// sendCreate sends c alone, in the background, unless it is sent or
// claimed already.
func (fs *FS) sendCreate(c *asyncCreate) {
	if !c.claim() {
		return
	}
	fs.workers.run(func() {
		fs.createSlots <- struct{}{}
		defer func() { <-fs.createSlots }()
		// Not the caller's context: the create outlives the call that
		// answered it.
		fs.finishCreate(c, fs.sendCreateEntry(context.Background(), c.entry, fs.cfg.DeferDurability))
	})
}

// sendCreateEntry sends the exclusive create of a create answered early
// with entry e (its own, or the file's first commit).
func (fs *FS) sendCreateEntry(ctx context.Context, e *filerpb.Entry, deferred bool) error {
	_, err := fs.filer.CreateEntry(ctx, &filerpb.CreateEntryRequest{Entry: e, Exclusive: true, NoParents: true,
		DeferredDurability: deferred})
	return err
}

// finishCreate records the filer's answer to c and wakes its waiters.
func (fs *FS) finishCreate(c *asyncCreate, err error) {
	full := c.entry.Path
	fs.cache.endOwn(err, full)
	fs.cache.evict(full)
	if err != nil {
		fs.log.Warn("fsview: a create answered early failed; the file's data will not be kept", "path", full, "err", err)
		// What the view knew of the directory was wrong (the name was
		// made elsewhere) or does not tell enough (a quota): its next
		// creates wait for the filer's answer.
		fs.cache.unlist(path.Dir(full))
	}
	c.err = err
	fs.createMu.Lock()
	delete(fs.creating, c)
	fs.createMu.Unlock()
	close(c.done)
}

// waitCreate waits for the create answered early of the file open here at
// full, if any (Config.AsyncCreate): a change of the name (unlink, rmdir,
// rename, link) is then made to what the filer has.
func (fs *FS) waitCreate(full string) {
	f := fs.openFile(full)
	if f == nil {
		return
	}
	f.mu.Lock()
	c := f.created
	f.mu.Unlock()
	if c != nil {
		fs.sendCreate(c)
		<-c.done
	}
}

// settle waits for the creates on their way (Config.AsyncCreate): every
// other change of the namespace, and a listing, comes after them.
func (fs *FS) settle() {
	fs.createMu.Lock()
	if len(fs.creating) == 0 {
		fs.createMu.Unlock()
		return
	}
	cs := make([]*asyncCreate, 0, len(fs.creating))
	for c := range fs.creating {
		cs = append(cs, c)
	}
	fs.createMu.Unlock()
	for _, c := range cs {
		fs.sendCreate(c)
	}
	for _, c := range cs {
		<-c.done
	}
}

func (fs *FS) update(ctx context.Context, e *filerpb.Entry) error {
	fs.cache.evict(e.Path)
	defer fs.cache.evict(e.Path)
	fs.cache.beginOwn(e.Path)
	_, err := fs.filer.UpdateEntry(ctx, &filerpb.UpdateEntryRequest{Entry: e, DeferredDurability: fs.deferring(ctx)})
	fs.cache.endOwn(err, e.Path)
	return err
}

func (fs *FS) create(ctx context.Context, e *filerpb.Entry, exclusive bool) error {
	fs.settle()
	fs.cache.evict(e.Path)
	defer fs.cache.evict(e.Path)
	fs.cache.beginOwn(e.Path)
	_, err := fs.filer.CreateEntry(ctx, &filerpb.CreateEntryRequest{Entry: e, Exclusive: exclusive, NoParents: true, DeferredDurability: fs.deferring(ctx)})
	fs.cache.endOwn(err, e.Path)
	if err == nil {
		fs.touches.namesChanged(e.Path)
	}
	return err
}

func (fs *FS) delete(ctx context.Context, full string, recursive bool) error {
	fs.settle()
	fs.cache.evict(full)
	defer fs.cache.evict(full)
	fs.cache.moving(full)
	fs.cache.beginOwn(full)
	_, err := fs.filer.DeleteEntry(ctx, &filerpb.DeleteEntryRequest{Path: full, Recursive: recursive})
	fs.cache.endOwn(err, full)
	if err == nil {
		fs.touches.namesChanged(full)
	}
	return err
}

func (fs *FS) rename(ctx context.Context, from, to string) error {
	fs.settle()
	fs.cache.evict(from, to)
	defer fs.cache.evict(from, to)
	fs.cache.moving(from, to)
	fs.cache.beginRename(from, to)
	_, err := fs.filer.Rename(ctx, &filerpb.RenameRequest{From: from, To: to})
	fs.cache.endRename(err, from, to)
	if err == nil {
		fs.touches.namesChanged(from, to)
	}
	return err
}

// absentError is ENOENT answered from the cache (IsCachedAbsence).
type absentError struct{ path string }

func (e *absentError) Error() string { return e.path + ": no such entry (cached)" }
func (e *absentError) Unwrap() error { return syscall.ENOENT }

// IsCachedAbsence reports whether err is an ENOENT the view answered from
// a complete listing kept fresh by the metadata events: the FUSE mount
// lets the kernel cache such answers briefly.
func IsCachedAbsence(err error) bool {
	var a *absentError
	return errors.As(err, &a)
}

func isNotFound(err error) bool { return Errno(err) == syscall.ENOENT }

// countCall counts the round trips to the filer (Stats.FilerCalls).
func (fs *FS) countCall(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	fs.calls.Add(1)
	return invoker(ctx, method, req, reply, cc, opts...)
}

// Stats are a view's counters, for metrics.
type Stats struct {
	FilerCalls       int64 // unary calls to the filer, of any kind
	FilerLookups     int64 // metadata lookups that went to the filer
	MetaCacheEntries int   // entries in the metadata cache
	ChunkCacheHits   int64 // chunk reads served by the local chunk cache (--cache.dir)
	ChunkCacheMisses int64
	ChunkCacheBytes  int64
	// ReadMisses: reads of committed content that found it neither in a
	// read-ahead buffer nor in a fetch on its way, and fetched it
	// themselves. A sequential reader has a few at its start; many mean
	// the read-ahead does not keep up or fetches what is not read.
	ReadMisses int64
	// SpecHits: small files opened for reading whose fetch, started from
	// the cached entry while the open asked the filer, was kept; SpecMisses:
	// such fetches dropped because the filer's entry differed (a change made
	// elsewhere whose event had not arrived yet).
	SpecHits, SpecMisses int64
}

// Stats returns the view's counters.
func (fs *FS) Stats() Stats {
	st := Stats{FilerCalls: fs.calls.Load(), FilerLookups: fs.cache.rpcs.Load(), ReadMisses: fs.readMisses.Load(),
		SpecHits: fs.specHits.Load(), SpecMisses: fs.specMisses.Load()}
	fs.cache.mu.Lock()
	st.MetaCacheEntries = len(fs.cache.entries)
	fs.cache.mu.Unlock()
	if fs.chunks != nil {
		st.ChunkCacheHits, st.ChunkCacheMisses, st.ChunkCacheBytes = fs.chunks.hits.Load(), fs.chunks.misses.Load(), fs.chunks.used()
	}
	return st
}
