package filersync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// Config configures a Syncer between filers A and B.
type Config struct {
	A, B         string // the filers' gRPC addresses
	APath, BPath string // the directories kept in sync ("" = "/")
	Workers      int    // files copied at once per direction; 0 means 8
	// LogEvery is how often the positions and lag are logged; 0 means 10s,
	// negative never.
	LogEvery       time.Duration
	ConnectTimeout time.Duration // 0 means 1 minute
	HTTPClient     *http.Client  // for the volume servers; nil: a default one
	Logger         *slog.Logger
	// AToken, BToken are the access tokens shown to each cluster ("" none).
	AToken, BToken string
}

// Syncer keeps two directories of two clusters identical, active-active.
// See docs/filer-sync.md for the rules.
type Syncer struct {
	cfg  Config
	a, b *Site
	dirs [2]*direction
	log  *slog.Logger

	// testCompared, when set, runs after each entry a tree comparison
	// compared (sp: the source path); an error fails the attempt.
	testCompared func(d *direction, sp string) error
}

// other is the direction opposite to d.
func (s *Syncer) other(d *direction) *direction {
	if s.dirs[0] == d {
		return s.dirs[1]
	}
	return s.dirs[0]
}

// DirStatus is one direction's progress.
type DirStatus struct {
	From       string  `json:"from"` // "a" or "b"
	To         string  `json:"to"`
	Seq        uint64  `json:"seq"`       // last source event applied
	SourceSeq  uint64  `json:"sourceSeq"` // the source's newest event when last asked
	LagEvents  uint64  `json:"lagEvents"` // SourceSeq - Seq
	LagSeconds float64 `json:"lagSeconds"`
	Copies     int64   `json:"copies"` // files whose data was copied
	Bytes      int64   `json:"bytes"`
	Deletes    int64   `json:"deletes"`
	Renames    int64   `json:"renames"`
	Attrs      int64   `json:"attrs"`     // entries whose attributes alone were updated
	Skipped    int64   `json:"skipped"`   // events that needed nothing (echoes, already equal, older)
	FullSyncs  int64   `json:"fullSyncs"` // tree comparisons (first run, trimmed log)
	CaughtUp   bool    `json:"caughtUp"`
	LastError  string  `json:"lastError,omitempty"`

	lastEventNs  int64
	sourceSeqSet bool
}

// New connects to both filers.
func New(ctx context.Context, cfg Config) (*Syncer, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.LogEvery == 0 {
		cfg.LogEvery = 10 * time.Second
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	var err error
	if cfg.APath, err = cleanRoot(cfg.APath); err != nil {
		return nil, fmt.Errorf("a.path: %w", err)
	}
	if cfg.BPath, err = cleanRoot(cfg.BPath); err != nil {
		return nil, fmt.Errorf("b.path: %w", err)
	}
	s := &Syncer{cfg: cfg, log: cfg.Logger}
	if s.a, err = OpenSiteAuth(ctx, "a", cfg.A, cfg.AToken, cfg.ConnectTimeout, cfg.HTTPClient, cfg.Logger); err != nil {
		return nil, err
	}
	if s.b, err = OpenSiteAuth(ctx, "b", cfg.B, cfg.BToken, cfg.ConnectTimeout, cfg.HTTPClient, cfg.Logger); err != nil {
		s.a.Close()
		return nil, err
	}
	if s.a.ID == s.b.ID {
		s.Close()
		return nil, fmt.Errorf("filers %s and %s belong to the same cluster (id %s): nothing to sync", cfg.A, cfg.B, s.a.ID)
	}
	s.dirs[0] = newDirection(s, s.a, s.b, cfg.APath, cfg.BPath)
	s.dirs[1] = newDirection(s, s.b, s.a, cfg.BPath, cfg.APath)
	return s, nil
}

func cleanRoot(p string) (string, error) {
	if p == "" {
		return "/", nil
	}
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("%q is not an absolute path", p)
	}
	p = path.Clean(p)
	if IsSystemPath(p) {
		return "", fmt.Errorf("%s is the sync's own state directory", p)
	}
	return p, nil
}

// Close drops the connections.
func (s *Syncer) Close() error {
	return errors.Join(s.a.Close(), s.b.Close())
}

// Sites are the two filers (A and B).
func (s *Syncer) Sites() (*Site, *Site) { return s.a, s.b }

// Run syncs both directions until ctx ends; then it stores the positions
// reached and returns nil.
func (s *Syncer) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, d := range s.dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.run(ctx)
		}()
	}
	if s.cfg.LogEvery > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(s.cfg.LogEvery)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					for _, st := range s.Status(ctx) {
						s.log.Info("filer.sync", "from", st.From, "to", st.To, "seq", st.Seq, "sourceSeq", st.SourceSeq,
							"lagEvents", st.LagEvents, "lagSeconds", fmt.Sprintf("%.1f", st.LagSeconds), "copies", st.Copies,
							"attrs", st.Attrs, "deletes", st.Deletes, "renames", st.Renames, "skipped", st.Skipped)
					}
				}
			}
		}()
	}
	wg.Wait()
	return nil
}

// Status reports both directions, asking each source for its newest event.
func (s *Syncer) Status(ctx context.Context) []DirStatus {
	out := make([]DirStatus, 0, 2)
	for _, d := range s.dirs {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		last, err := d.src.LastSeq(qctx)
		cancel()
		d.mu.Lock()
		st := d.st
		if err == nil {
			st.SourceSeq, st.sourceSeqSet = last, true
		}
		d.mu.Unlock()
		st.Seq = d.seq.Load()
		if st.SourceSeq > st.Seq {
			st.LagEvents = st.SourceSeq - st.Seq
			if st.lastEventNs > 0 {
				st.LagSeconds = time.Since(time.Unix(0, st.lastEventNs)).Seconds()
			}
		}
		st.Copies, st.Bytes = d.copies.Load(), d.bytes.Load()
		st.Deletes, st.Renames, st.Skipped = d.deletes.Load(), d.renames.Load(), d.skipped.Load()
		st.Attrs = d.attrs.Load()
		st.FullSyncs = d.fullSyncs.Load()
		st.CaughtUp = d.started.Load() && st.sourceSeqSet && st.LagEvents == 0
		out = append(out, st)
	}
	return out
}

// CaughtUp reports whether both directions have applied every event their
// source had when asked.
func (s *Syncer) CaughtUp(ctx context.Context) bool {
	for _, st := range s.Status(ctx) {
		if !st.CaughtUp {
			return false
		}
	}
	return true
}

// direction applies src's events to dst.
type direction struct {
	s                *Syncer
	src, dst         *Site
	srcRoot, dstRoot string
	posName          string
	log              *slog.Logger

	seq                                      atomic.Uint64
	started                                  atomic.Bool
	copies, bytes, deletes, renames, skipped atomic.Int64
	attrs                                    atomic.Int64
	fullSyncs                                atomic.Int64
	cmp                                      *treeCmp // a tree comparison in progress (run's goroutine only)
	// back: a finished comparison's dst-only entries, [source path,
	// target path], copied to src by drainBack once seq reaches backSeq.
	back     [][2]string
	backSeq  uint64
	mu       sync.Mutex
	st       DirStatus
	dirty    bool
	lastSave time.Time
}

func newDirection(s *Syncer, src, dst *Site, srcRoot, dstRoot string) *direction {
	h := sha256.Sum256([]byte(srcRoot + "\x00" + dstRoot))
	d := &direction{s: s, src: src, dst: dst, srcRoot: srcRoot, dstRoot: dstRoot,
		posName: src.ID + "-" + hex.EncodeToString(h[:6]),
		log:     s.log.With("from", src.Name, "to", dst.Name)}
	d.st.From, d.st.To = src.Name, dst.Name
	return d
}

// run follows src's event log until ctx ends, reconnecting after errors.
func (d *direction) run(ctx context.Context) {
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		err := d.follow(ctx)
		if ctx.Err() != nil {
			break
		}
		if err == nil { // the position was re-established (tree comparison): follow from there
			backoff = 200 * time.Millisecond
			continue
		}
		d.setErr(err)
		d.log.Warn("filer.sync: retrying", "err", err, "after", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
	d.save(context.Background(), true)
}

func (d *direction) setErr(err error) {
	d.mu.Lock()
	if err != nil {
		d.st.LastError = err.Error()
	} else {
		d.st.LastError = ""
	}
	d.mu.Unlock()
}

// save stores the position when something changed since the last save.
// Events that only touched the system directory do not make it dirty, so
// the two directions' position writes do not wake each other forever.
func (d *direction) save(ctx context.Context, force bool) {
	d.mu.Lock()
	dirty := d.dirty && (force || time.Since(d.lastSave) >= time.Second)
	d.mu.Unlock()
	if !dirty || !d.started.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := d.dst.SavePosition(ctx, d.posName, d.seq.Load()); err != nil {
		d.log.Warn("filer.sync: position not saved", "err", err)
		return
	}
	d.mu.Lock()
	d.dirty, d.lastSave = false, time.Now()
	d.mu.Unlock()
}

func (d *direction) markDirty() {
	d.mu.Lock()
	d.dirty = true
	d.mu.Unlock()
}

// follow loads (or establishes) the position and applies events from it.
func (d *direction) follow(ctx context.Context) error {
	if !d.started.Load() {
		seq, ok, err := d.dst.LoadPosition(ctx, d.posName)
		if err != nil {
			return err
		}
		if !ok {
			if d.cmp == nil {
				d.log.Info("filer.sync: no stored position: comparing the trees")
			}
			if seq, err = d.fullSync(ctx); err != nil {
				return err
			}
			d.markDirty()
		} else {
			d.log.Info("filer.sync: resuming", "seq", seq)
		}
		d.seq.Store(seq)
		d.started.Store(true)
		d.save(ctx, true)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := d.src.fc.SubscribeMetadata(sctx, &filerpb.SubscribeMetadataRequest{SinceSeq: d.seq.Load()})
	if err != nil {
		return err
	}
	events := make(chan *filerpb.MetadataEvent, 1024)
	recvErr := make(chan error, 1)
	go func() {
		defer close(events)
		for {
			ev, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case events <- ev:
			case <-sctx.Done():
				recvErr <- sctx.Err()
				return
			}
		}
	}()
	var batch []*filerpb.MetadataEvent
	idle := time.NewTimer(time.Hour)
	defer idle.Stop()
	for {
		var ev *filerpb.MetadataEvent
		var ok bool
		if len(batch) == 0 {
			idle.Reset(300 * time.Millisecond)
			select {
			case ev, ok = <-events:
			case <-idle.C:
				if err := d.drainBack(ctx); err != nil {
					return err
				}
				d.save(ctx, true)
				continue
			case <-ctx.Done():
				return nil
			}
		} else {
			select {
			case ev, ok = <-events:
			default:
				ok, ev = true, nil // nothing ready now: flush
			}
		}
		if !ok { // stream ended
			if err := d.flush(ctx, batch); err != nil {
				return err
			}
			err := <-recvErr
			if status.Code(err) == codes.OutOfRange {
				d.log.Warn("filer.sync: the stored position was trimmed from the source's event log: comparing the trees", "seq", d.seq.Load(), "err", err)
				seq, ferr := d.fullSync(ctx)
				if ferr != nil {
					return ferr
				}
				d.seq.Store(seq)
				d.markDirty()
				d.save(ctx, true)
				return nil
			}
			return err
		}
		if ev == nil {
			if err := d.flush(ctx, batch); err != nil {
				return err
			}
			if err := d.drainBack(ctx); err != nil {
				return err
			}
			batch = batch[:0]
			d.save(ctx, false)
			continue
		}
		if parallelizable(ev) {
			batch = append(batch, ev)
			if len(batch) >= 512 {
				if err := d.flush(ctx, batch); err != nil {
					return err
				}
				batch = batch[:0]
				d.save(ctx, false)
			}
			continue
		}
		if err := d.flush(ctx, batch); err != nil {
			return err
		}
		batch = batch[:0]
		if err := d.flush(ctx, []*filerpb.MetadataEvent{ev}); err != nil {
			return err
		}
		d.save(ctx, false)
	}
}

// parallelizable: a create or update of a file; those are applied
// concurrently (events of one path in order). Everything else (deletes,
// renames, directories) is applied alone, after what came before.
func parallelizable(ev *filerpb.MetadataEvent) bool {
	return (ev.Type == filerpb.MetadataEvent_CREATE || ev.Type == filerpb.MetadataEvent_UPDATE) &&
		ev.NewEntry != nil && !ev.NewEntry.IsDir
}

// flush applies a batch and advances the position past it.
func (d *direction) flush(ctx context.Context, batch []*filerpb.MetadataEvent) error {
	if len(batch) == 0 {
		return nil
	}
	workers := min(d.s.cfg.Workers, len(batch))
	lanes := make([][]*filerpb.MetadataEvent, workers)
	for _, ev := range batch {
		h := fnv.New32a()
		h.Write([]byte(eventPath(ev)))
		i := int(h.Sum32() % uint32(workers))
		lanes[i] = append(lanes[i], ev)
	}
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i, lane := range lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, ev := range lane {
				if err := d.applyRetrying(ctx, ev); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	last := batch[len(batch)-1]
	d.seq.Store(last.Seq)
	d.mu.Lock()
	d.st.lastEventNs = last.TimeNs
	d.mu.Unlock()
	d.setErr(nil)
	return nil
}

func eventPath(ev *filerpb.MetadataEvent) string {
	if ev.NewEntry != nil {
		return ev.NewEntry.Path
	}
	if ev.OldEntry != nil {
		return ev.OldEntry.Path
	}
	return ""
}

// applyRetrying applies ev, retrying a few times; an event that keeps
// failing for a reason other than a cancelled context is logged and
// skipped after that, so one bad file cannot stop the sync.
func (d *direction) applyRetrying(ctx context.Context, ev *filerpb.MetadataEvent) error {
	var err error
	for try := range 6 {
		if err = d.apply(ctx, ev); err == nil || ctx.Err() != nil {
			return err
		}
		if try < 5 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(100<<try) * time.Millisecond):
			}
		}
	}
	if unavailable(err) {
		return err // the cluster is away: retry from the stream
	}
	d.log.Error("filer.sync: event skipped after retries", "seq", ev.Seq, "path", eventPath(ev), "err", err)
	return nil
}

func unavailable(err error) bool {
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		c := se.GRPCStatus().Code()
		return c == codes.Unavailable || c == codes.DeadlineExceeded || c == codes.Canceled
	}
	return false
}

// mapPath maps a source path to the destination; ok is false outside the
// synced directory or in the system directory.
func (d *direction) mapPath(p string) (string, bool) {
	if IsSystemPath(p) {
		return "", false
	}
	rel, ok := within(d.srcRoot, p)
	if !ok {
		return "", false
	}
	if rel == "" {
		return d.dstRoot, true
	}
	return path.Join(d.dstRoot, rel), true
}

func within(root, p string) (string, bool) {
	if root == "/" {
		return strings.TrimPrefix(p, "/"), true
	}
	if p == root {
		return "", true
	}
	if strings.HasPrefix(p, root+"/") {
		return p[len(root)+1:], true
	}
	return "", false
}

func (d *direction) apply(ctx context.Context, ev *filerpb.MetadataEvent) error {
	switch ev.Type {
	case filerpb.MetadataEvent_CREATE, filerpb.MetadataEvent_UPDATE:
		if ev.NewEntry == nil {
			return nil
		}
		dp, ok := d.mapPath(ev.NewEntry.Path)
		if !ok {
			return nil
		}
		d.markDirty()
		if fromDst(ev.NewEntry, d.dst.ID) {
			d.skipped.Add(1) // an echo of what this sync wrote
			return nil
		}
		se, err := d.src.Lookup(ctx, ev.NewEntry.Path)
		if err != nil {
			return err
		}
		if se == nil {
			d.skipped.Add(1) // gone since; its delete event follows
			return nil
		}
		return d.copyEntry(ctx, se, dp)
	case filerpb.MetadataEvent_DELETE:
		if ev.OldEntry == nil {
			return nil
		}
		dp, ok := d.mapPath(ev.OldEntry.Path)
		if !ok {
			return nil
		}
		d.markDirty()
		return d.deletePath(ctx, ev.OldEntry, dp)
	case filerpb.MetadataEvent_RENAME:
		if ev.OldEntry == nil || ev.NewEntry == nil {
			return nil
		}
		return d.rename(ctx, ev)
	}
	return nil
}

// wins: version x (of cluster xID) beats version y (of cluster yID): the
// newer mtime wins, a tie goes to the greater cluster id.
func wins(x *filerpb.Entry, xID string, y *filerpb.Entry, yID string) bool {
	if x.MtimeNs != y.MtimeNs {
		return x.MtimeNs > y.MtimeNs
	}
	return xID > yID
}

// Wins is the conflict rule, exported for documentation and tests.
func Wins(xMtimeNs int64, xID string, yMtimeNs int64, yID string) bool {
	return wins(&filerpb.Entry{MtimeNs: xMtimeNs}, xID, &filerpb.Entry{MtimeNs: yMtimeNs}, yID)
}

// copyEntry makes dst's entry at dp equal to se unless dst's version wins.
func (d *direction) copyEntry(ctx context.Context, se *filerpb.Entry, dp string) error {
	de, err := d.dst.Lookup(ctx, dp)
	if err != nil {
		return err
	}
	if de != nil {
		if sameData(se, d.src.ID, de, d.dst.ID) {
			return d.syncAttributes(ctx, se, de)
		}
		if wins(de, d.dst.ID, se, d.src.ID) {
			d.skipped.Add(1) // dst's version is newer; it travels the other way
			return nil
		}
		if de.IsDir != se.IsDir {
			if err := d.dst.Delete(ctx, dp); err != nil {
				return err
			}
		}
	}
	ne := d.copyAttrs(se, dp)
	if se.IsDir {
		return d.dst.CreateMeta(ctx, ne)
	}
	// A file dst did not have is created exclusively: if a copy whose
	// answer was lost (or a user) created it meanwhile, this one fails
	// and the retry compares again instead of copying twice.
	isNew := de == nil
	if se.Size == 0 || se.SymlinkTarget != "" {
		ne.Md5 = se.Md5
		if err := d.dst.createMeta(ctx, ne, isNew); err != nil {
			return err
		}
		d.copies.Add(1)
		return nil
	}
	r, err := d.src.Open(ctx, se)
	if err != nil {
		return d.staleOr(ctx, se, err)
	}
	defer r.Close()
	ne.Size = se.Size
	w, err := d.dst.write(ctx, ne, &exact{r: r, n: se.Size}, isNew)
	if err != nil {
		return d.staleOr(ctx, se, err)
	}
	d.copies.Add(1)
	d.bytes.Add(w.Size)
	return nil
}

// copyAttrs is se's attributes for dst's path dp, marked as src's version.
func (d *direction) copyAttrs(se *filerpb.Entry, dp string) *filerpb.Entry {
	ne := cloneAttrs(se)
	ne.Path = dp
	if ne.Xattrs == nil {
		ne.Xattrs = map[string][]byte{}
	}
	delete(ne.Xattrs, XattrOrigin)
	ne.Xattrs[XattrOrigin] = newMarker(d.src.ID, se, ne)
	return ne
}

// syncAttributes: de already holds se's data; give it se's attributes
// when they differ and se's changed last (docs/filer-sync.md). Only the
// attributes travel, never the data, and only if de has not changed since
// it was read.
func (d *direction) syncAttributes(ctx context.Context, se, de *filerpb.Entry) error {
	if attrDigest(se) == attrDigest(de) || de.Path == "/" {
		d.skipped.Add(1)
		return nil
	}
	sc, sid := attrClock(se, d.src.ID)
	dc, did := attrClock(de, d.dst.ID)
	if dc > sc || (dc == sc && did >= sid) {
		d.skipped.Add(1) // dst's attributes changed last; they travel the other way
		return nil
	}
	ne := d.copyAttrs(se, de.Path)
	if de.IsDir {
		ne.MtimeNs = de.MtimeNs // a directory's mtime is each site's own
	}
	if err := d.dst.SetAttributes(ctx, ne, de.CtimeNs); err != nil {
		return err // changed since read (FAILED_PRECONDITION): the retry compares again
	}
	d.attrs.Add(1)
	return nil
}

// staleOr: a read of se failed; when se was replaced or deleted since, that
// is expected (its own event follows) and not an error.
func (d *direction) staleOr(ctx context.Context, se *filerpb.Entry, err error) error {
	now, lerr := d.src.Lookup(ctx, se.Path)
	if lerr == nil && (now == nil || now.MtimeNs != se.MtimeNs || now.Size != se.Size) {
		d.skipped.Add(1)
		return nil
	}
	return err
}

// exact reads r and fails unless it holds exactly n bytes.
type exact struct {
	r    io.Reader
	n    int64
	read int64
}

var errSizeChanged = errors.New("filer.sync: the source file's size changed while it was read")

func (e *exact) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	e.read += int64(n)
	if e.read > e.n || (errors.Is(err, io.EOF) && e.read != e.n) {
		return n, errSizeChanged
	}
	return n, err
}

// deletePath applies the delete of src's old entry to dst's dp, unless src
// has an entry there again or dst holds a newer version than the one
// deleted (an update the deleting side never saw wins; docs/filer-sync.md).
func (d *direction) deletePath(ctx context.Context, old *filerpb.Entry, dp string) error {
	se, err := d.src.Lookup(ctx, old.Path)
	if err != nil {
		return err
	}
	if se != nil && !d.resurrected(se, old) {
		d.skipped.Add(1)
		return nil
	}
	de, err := d.dst.Lookup(ctx, dp)
	if err != nil {
		return err
	}
	if de == nil {
		d.skipped.Add(1)
		return nil
	}
	if !de.IsDir && !sameData(old, d.src.ID, de, d.dst.ID) && wins(de, d.dst.ID, old, d.src.ID) {
		d.skipped.Add(1) // dst has a newer version than the one deleted: it stays, and travels back
		return nil
	}
	if err := d.dst.Delete(ctx, dp); err != nil {
		return err
	}
	d.deletes.Add(1)
	return nil
}

// resurrected: se, found on src at the path of the deleted entry old, is
// only the sync's copy from dst of the version deleted (or of an older
// one): a tree comparison or a stale read copied it back while the delete
// was on its way. The delete stands; once dst's copy is deleted too, the
// other direction removes se.
func (d *direction) resurrected(se, old *filerpb.Entry) bool {
	if se.IsDir || old.IsDir {
		return false
	}
	m, ok := markerOf(se)
	if !ok || m.origin != d.dst.ID {
		return false
	}
	return se.MtimeNs < old.MtimeNs || (se.MtimeNs == old.MtimeNs && se.Size == old.Size)
}

// rename applies a rename: a rename on dst when dst still has the old
// version at the old path, else a copy of the new path and a delete of the
// old one.
func (d *direction) rename(ctx context.Context, ev *filerpb.MetadataEvent) error {
	oldP, newP := ev.OldEntry.Path, ev.NewEntry.Path
	dOld, oldIn := d.mapPath(oldP)
	dNew, newIn := d.mapPath(newP)
	if !oldIn && !newIn {
		return nil
	}
	d.markDirty()
	if !newIn {
		return d.deletePath(ctx, ev.OldEntry, dOld)
	}
	if !oldIn {
		return d.syncTree(ctx, newP, dNew)
	}
	sn, err := d.src.Lookup(ctx, newP)
	if err != nil || sn == nil {
		return err
	}
	so, err := d.src.Lookup(ctx, oldP)
	if err != nil {
		return err
	}
	if so == nil {
		do, err := d.dst.Lookup(ctx, dOld)
		if err != nil {
			return err
		}
		dn, err := d.dst.Lookup(ctx, dNew)
		if err != nil {
			return err
		}
		if do != nil && sameData(ev.OldEntry, d.src.ID, do, d.dst.ID) && (dn == nil || !dn.IsDir) {
			if err := d.dst.Rename(ctx, dOld, dNew); err != nil {
				return err
			}
			d.renames.Add(1)
			if sn.IsDir {
				return nil
			}
			return d.copyEntry(ctx, sn, dNew) // a no-op unless the file changed since
		}
	}
	if err := d.syncTree(ctx, newP, dNew); err != nil {
		return err
	}
	if so == nil {
		return d.deletePath(ctx, ev.OldEntry, dOld)
	}
	return nil
}

// syncTree copies src's entry sp and everything under it to dp.
func (d *direction) syncTree(ctx context.Context, sp, dp string) error {
	se, err := d.src.Lookup(ctx, sp)
	if err != nil || se == nil {
		return err
	}
	if err := d.copyEntry(ctx, se, dp); err != nil || !se.IsDir {
		return err
	}
	return d.copyTree(ctx, sp)
}

// copyTree copies every entry under src's sp, Workers at a time.
func (d *direction) copyTree(ctx context.Context, sp string) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(d.s.cfg.Workers)
	err := d.src.Walk(gctx, sp, func(e *filerpb.Entry) error {
		dp, ok := d.mapPath(e.Path)
		switch {
		case !ok:
			return nil
		case e.IsDir: // parents first, so directories keep their attributes
			return d.copyRetrying(gctx, e, dp)
		case gctx.Err() != nil:
			return gctx.Err() // a worker failed: stop walking
		}
		g.Go(func() error { return d.copyRetrying(gctx, e, dp) })
		return nil
	})
	if gerr := g.Wait(); gerr != nil {
		return gerr
	}
	return err
}

func (d *direction) copyRetrying(ctx context.Context, e *filerpb.Entry, dp string) error {
	var err error
	for try := range 4 {
		if err = d.copyEntry(ctx, e, dp); err == nil || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(100<<try) * time.Millisecond):
		}
	}
	return err
}
