// Package backup copies a filer directory to a destination (a local
// directory or an S3 bucket) and keeps it up to date by following the
// filer's metadata event log from a position stored with the backup, and
// restores such a copy into a filer. See docs/operations.md.
package backup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"golang.org/x/sync/errgroup"

	"github.com/kelpfs/kelp/internal/filersync"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// Config configures a backup or a restore.
type Config struct {
	Filer      string // the filer's gRPC address
	Path       string // the filer directory ("" = "/")
	Dest       Dest
	Workers    int  // files copied at once; 0 means 8
	Once       bool // backup: stop when caught up with the log as it was at the start
	HTTPClient *http.Client
	Logger     *slog.Logger
	// AccessToken is shown to the filer and its masters ("" none).
	AccessToken string
	// Key, when set (DeriveKey), encrypts the backup: every file's content
	// is sealed with AES-256-GCM before it reaches Dest, and a restore
	// opens it. A backup of a filer that encrypts data at rest needs a Key
	// unless Plaintext says otherwise.
	Key []byte
	// Plaintext allows an unencrypted backup of an encrypting filer.
	Plaintext bool
	// Stats, if set, receives the counts as the run goes (for metrics);
	// nil means fresh ones.
	Stats *Stats
}

// Stats count what a run did.
type Stats struct {
	Copied, Deleted, Renamed, Skipped atomic.Int64
	Bytes                             atomic.Int64
	FullScans                         atomic.Int64
	Seq                               atomic.Uint64
}

type run struct {
	cfg   Config
	site  *filersync.Site
	root  string
	log   *slog.Logger
	stats *Stats
}

func start(ctx context.Context, cfg *Config) (*run, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	root := cfg.Path
	if root == "" {
		root = "/"
	}
	if !strings.HasPrefix(root, "/") {
		return nil, fmt.Errorf("backup: path %q is not absolute", root)
	}
	root = path.Clean(root)
	if cfg.Key != nil && len(cfg.Key) != 32 {
		return nil, fmt.Errorf("backup: a key of %d bytes, want 32 (DeriveKey)", len(cfg.Key))
	}
	st, ok, err := cfg.Dest.LoadState(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkState(st, ok, cfg.Key); err != nil {
		return nil, err
	}
	site, err := filersync.OpenSiteAuth(ctx, "filer", cfg.Filer, cfg.AccessToken, time.Minute, cfg.HTTPClient, cfg.Logger)
	if err != nil {
		return nil, err
	}
	if cfg.Key != nil {
		cfg.Dest = cryptDest{Dest: cfg.Dest, key: cfg.Key}
	}
	return &run{cfg: *cfg, site: site, root: root, log: cfg.Logger, stats: cmp.Or(cfg.Stats, &Stats{})}, nil
}

func (r *run) rel(p string) (string, bool) {
	if filersync.IsSystemPath(p) {
		return "", false
	}
	if r.root == "/" {
		return strings.TrimPrefix(p, "/"), p != "/"
	}
	if strings.HasPrefix(p, r.root+"/") {
		return p[len(r.root)+1:], true
	}
	return "", false
}

func (r *run) abs(rel string) string {
	if rel == "" {
		return r.root
	}
	return path.Join(r.root, rel)
}

// Backup brings the destination up to date with the filer: a full copy on
// the first run (or when the stored position was trimmed from the log),
// then the events since the stored position; with Once it returns when
// caught up, else it follows new events until ctx ends.
func Backup(ctx context.Context, cfg Config) (*Stats, error) {
	r, err := start(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	defer r.site.Close()
	if cfg.Key == nil && !cfg.Plaintext && r.site.EncryptsData() {
		return r.stats, errors.New("backup: the filer encrypts data at rest (--encrypt-data) and this backup would hold plaintext: give an encryption key (--encrypt.key), or --plaintext to back it up unencrypted")
	}
	st, ok, err := r.cfg.Dest.LoadState(ctx)
	if err != nil {
		return r.stats, err
	}
	if ok && (st.ClusterID != r.site.ID || st.Path != r.root) {
		return r.stats, fmt.Errorf("backup: the destination holds a backup of cluster %s path %s, not of cluster %s path %s",
			st.ClusterID, st.Path, r.site.ID, r.root)
	}
	st.ClusterID, st.Path = r.site.ID, r.root
	if !ok {
		if st.Seq, err = r.fullScan(ctx); err != nil {
			return r.stats, err
		}
		if err := r.save(ctx, &st); err != nil {
			return r.stats, err
		}
	}
	for {
		err := r.follow(ctx, &st)
		if err == nil || ctx.Err() != nil {
			if serr := r.save(context.Background(), &st); serr != nil && err == nil {
				err = serr
			}
			if ctx.Err() != nil && !cfg.Once {
				err = nil
			}
			return r.stats, err
		}
		if status.Code(err) == codes.OutOfRange {
			r.log.Warn("backup: the stored position was trimmed from the filer's event log: comparing the trees", "seq", st.Seq, "err", err)
			if st.Seq, err = r.fullScan(ctx); err != nil {
				return r.stats, err
			}
			continue
		}
		return r.stats, err
	}
}

func (r *run) save(ctx context.Context, st *State) error {
	st.Updated = time.Now().UTC().Format(time.RFC3339)
	r.stats.Seq.Store(st.Seq)
	return r.cfg.Dest.SaveState(ctx, *st)
}

// follow applies events after st.Seq, saving the position every second.
func (r *run) follow(ctx context.Context, st *State) error {
	target := uint64(0)
	if r.cfg.Once {
		last, err := r.site.LastSeq(ctx)
		if err != nil {
			return err
		}
		if st.Seq >= last {
			return nil
		}
		target = last
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := r.site.Filer().SubscribeMetadata(sctx, &filerpb.SubscribeMetadataRequest{SinceSeq: st.Seq})
	if err != nil {
		return err
	}
	lastSave := time.Now()
	for {
		ev, err := stream.Recv()
		if err != nil {
			return err
		}
		if err := r.apply(ctx, ev); err != nil {
			return err
		}
		st.Seq = ev.Seq
		r.stats.Seq.Store(ev.Seq)
		if target > 0 && ev.Seq >= target {
			return nil
		}
		if time.Since(lastSave) > time.Second {
			if err := r.save(ctx, st); err != nil {
				return err
			}
			lastSave = time.Now()
		}
	}
}

func (r *run) apply(ctx context.Context, ev *filerpb.MetadataEvent) error {
	switch ev.Type {
	case filerpb.MetadataEvent_CREATE, filerpb.MetadataEvent_UPDATE:
		if ev.NewEntry == nil {
			return nil
		}
		rel, ok := r.rel(ev.NewEntry.Path)
		if !ok {
			return nil
		}
		e, err := r.site.Lookup(ctx, ev.NewEntry.Path)
		if err != nil || e == nil {
			return err // gone since: its delete follows
		}
		return r.copy(ctx, e, rel)
	case filerpb.MetadataEvent_DELETE:
		if ev.OldEntry == nil {
			return nil
		}
		rel, ok := r.rel(ev.OldEntry.Path)
		if !ok {
			return nil
		}
		r.stats.Deleted.Add(1)
		return r.cfg.Dest.Delete(ctx, rel)
	case filerpb.MetadataEvent_RENAME:
		if ev.OldEntry == nil || ev.NewEntry == nil {
			return nil
		}
		oldRel, oldIn := r.rel(ev.OldEntry.Path)
		newRel, newIn := r.rel(ev.NewEntry.Path)
		switch {
		case oldIn && newIn:
			if _, ok, err := r.cfg.Dest.Stat(ctx, oldRel); err != nil {
				return err
			} else if ok {
				if err := r.cfg.Dest.Rename(ctx, oldRel, newRel); err != nil {
					return err
				}
				r.stats.Renamed.Add(1)
			}
			return r.copyTree(ctx, ev.NewEntry.Path) // a no-op for what the rename brought
		case oldIn:
			r.stats.Deleted.Add(1)
			return r.cfg.Dest.Delete(ctx, oldRel)
		case newIn:
			return r.copyTree(ctx, ev.NewEntry.Path)
		}
	}
	return nil
}

func metaOf(e *filerpb.Entry) Meta {
	m := Meta{Mode: os.FileMode(e.Mode), Mtime: time.Unix(0, e.MtimeNs), Size: e.Size, Link: e.SymlinkTarget, Attrs: attrsOf(e)}
	if e.IsDir {
		m.Mode |= os.ModeDir
		m.Size = 0
	}
	return m
}

// same: the destination holds this version (type, size, mtime, and the
// attributes where both sides know them).
func same(a, b Meta) bool {
	return a.Mode.Type() == b.Mode.Type() && a.Size == b.Size && a.Link == b.Link &&
		(a.Mode.IsDir() || a.Mtime.Equal(b.Mtime)) &&
		(a.Attrs == nil || b.Attrs == nil || a.Attrs.equal(b.Attrs))
}

// copy makes the destination's rel hold e.
func (r *run) copy(ctx context.Context, e *filerpb.Entry, rel string) error {
	m := metaOf(e)
	dm, ok, err := r.cfg.Dest.Stat(ctx, rel)
	if err != nil {
		return err
	}
	if ok && same(m, dm) {
		r.stats.Skipped.Add(1)
		return nil
	}
	if e.IsDir {
		return r.cfg.Dest.Mkdir(ctx, rel, m)
	}
	var body io.Reader = strings.NewReader("")
	if e.Size > 0 && e.SymlinkTarget == "" {
		rc, err := r.site.Open(ctx, e)
		if err != nil {
			return r.staleOr(ctx, e, err)
		}
		defer rc.Close()
		body = rc
	}
	if err := r.cfg.Dest.Put(ctx, rel, m, body); err != nil {
		return r.staleOr(ctx, e, err)
	}
	r.stats.Copied.Add(1)
	r.stats.Bytes.Add(e.Size)
	return nil
}

func (r *run) staleOr(ctx context.Context, e *filerpb.Entry, err error) error {
	now, lerr := r.site.Lookup(ctx, e.Path)
	if lerr == nil && (now == nil || now.MtimeNs != e.MtimeNs || now.Size != e.Size) {
		return nil // replaced or deleted while read: its own event follows
	}
	return err
}

// copyTree copies the entry p and everything under it.
func (r *run) copyTree(ctx context.Context, p string) error {
	e, err := r.site.Lookup(ctx, p)
	if err != nil || e == nil {
		return err
	}
	if rel, ok := r.rel(p); ok {
		if err := r.copy(ctx, e, rel); err != nil {
			return err
		}
	}
	if !e.IsDir {
		return nil
	}
	_, err = r.walkCopy(ctx, p)
	return err
}

// walkCopy copies everything under filer directory p, Workers files at a
// time, and returns the relative paths it saw.
func (r *run) walkCopy(ctx context.Context, p string) (map[string]bool, error) {
	seen := map[string]bool{}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.cfg.Workers)
	err := r.site.Walk(gctx, p, func(e *filerpb.Entry) error {
		rel, ok := r.rel(e.Path)
		if !ok {
			return nil
		}
		seen[rel] = true
		if e.IsDir {
			return r.copy(gctx, e, rel)
		}
		if err := gctx.Err(); err != nil {
			return err // a worker failed: stop walking
		}
		g.Go(func() error { return r.copy(gctx, e, rel) })
		return nil
	})
	if gerr := g.Wait(); gerr != nil {
		return seen, gerr
	}
	return seen, err
}

// fullScan makes the destination a copy of the directory as it is (copies
// what differs, deletes what the filer no longer has) and returns the
// position to follow from: the newest event before the scan began.
func (r *run) fullScan(ctx context.Context) (uint64, error) {
	seq, err := r.site.LastSeq(ctx)
	if err != nil {
		return 0, err
	}
	r.stats.FullScans.Add(1)
	t0 := time.Now()
	seen, err := r.walkCopy(ctx, r.root)
	if err != nil {
		return 0, err
	}
	var gone []string
	err = r.cfg.Dest.Walk(ctx, func(rel string, m Meta) error {
		if !seen[rel] {
			gone = append(gone, rel)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, rel := range gone {
		if err := r.cfg.Dest.Delete(ctx, rel); err != nil {
			return 0, err
		}
		r.stats.Deleted.Add(1)
	}
	r.log.Info("backup: full copy", "copied", r.stats.Copied.Load(), "deleted", len(gone), "took", time.Since(t0).Round(time.Millisecond), "seq", seq)
	return seq, nil
}

// Restore writes the backup's tree into the filer under cfg.Path. Files the
// filer already holds in the same version (size and mtime) are skipped, so
// an interrupted restore can be run again.
func Restore(ctx context.Context, cfg Config) (*Stats, error) {
	r, err := start(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	defer r.site.Close()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.Workers)
	err = cfg.Dest.Walk(gctx, func(rel string, m Meta) error {
		if m.Mode.IsDir() { // parents first, with their attributes
			e := &filerpb.Entry{Path: r.abs(rel), Mode: uint32(m.Mode), IsDir: true, MtimeNs: m.Mtime.UnixNano()}
			m.Attrs.apply(e)
			return r.site.CreateMeta(gctx, e)
		}
		if err := gctx.Err(); err != nil {
			return err // a worker failed: stop walking
		}
		g.Go(func() error { return r.restoreOne(gctx, rel, m) })
		return nil
	})
	if gerr := g.Wait(); gerr != nil {
		return r.stats, gerr
	}
	return r.stats, err
}

func (r *run) restoreOne(ctx context.Context, rel string, m Meta) error {
	p := r.abs(rel)
	e, err := r.site.Lookup(ctx, p)
	if err != nil {
		return err
	}
	if e != nil && same(metaOf(e), m) {
		r.stats.Skipped.Add(1)
		return nil
	}
	if e != nil && e.IsDir {
		if err := r.site.Delete(ctx, p); err != nil {
			return err
		}
	}
	ne := &filerpb.Entry{Path: p, Mode: uint32(m.Mode), MtimeNs: m.Mtime.UnixNano(), SymlinkTarget: m.Link, Size: m.Size}
	m.Attrs.apply(ne)
	if m.Link != "" || m.Size == 0 {
		if m.Link == "" {
			ne.Md5 = emptyMD5[:]
		}
		if err := r.site.CreateMeta(ctx, ne); err != nil {
			return err
		}
	} else {
		rc, err := r.cfg.Dest.Open(ctx, rel)
		if err != nil {
			return err
		}
		defer rc.Close()
		if _, err := r.site.Write(ctx, ne, rc); err != nil {
			return err
		}
	}
	r.stats.Copied.Add(1)
	r.stats.Bytes.Add(m.Size)
	return nil
}

var emptyMD5 = [16]byte{0xd4, 0x1d, 0x8c, 0xd9, 0x8f, 0x00, 0xb2, 0x04, 0xe9, 0x80, 0x09, 0x98, 0xec, 0xf8, 0x42, 0x7e}
