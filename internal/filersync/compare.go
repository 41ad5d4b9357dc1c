package filersync

import (
	"context"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// treeCmp is a tree comparison in progress (first run, trimmed log). It
// outlives a failed attempt (a cut link, a site away): the next attempt
// resumes after the last entry compared instead of starting over, and the
// log is then followed from the position read before the first attempt,
// so the events of the whole comparison's time are applied.
//
// Starting over would be wrong, not only slow: an entry compared before
// the cut and deleted on dst since would be copied back, since a
// comparison cannot tell "deleted on dst" from "created on src".
type treeCmp struct {
	seq    uint64 // the source's newest event before the first attempt
	cursor string // relative to srcRoot: every entry up to it, in walk order, is compared
	// ahead are entries after the cursor compared already (several are
	// compared at once, so some finish before those before them).
	ahead map[string]bool
	// dirs on dst that src no longer has and that were the sync's copies
	// from src: removed at the end, when empty.
	mu        sync.Mutex
	emptyDirs []string
	// back are the target's own entries the source lacks, [source path,
	// target path]: copied to the source once this direction has applied
	// the events up to the comparison's end (drainBack), unless a delete
	// among those removed them meanwhile.
	back [][2]string
}

func (c *treeCmp) addBack(sp, dp string) {
	c.mu.Lock()
	c.back = append(c.back, [2]string{sp, dp})
	c.mu.Unlock()
}

// listPage is how many entries a comparison lists at once per directory.
const listPage = 1000

// fullSync compares the trees and returns the source position to follow
// from. Per entry (docs/filer-sync.md):
//   - on both sides: the copy rules of an event (newer wins, attributes);
//   - only on src: copied, unless src's entry is the sync's unchanged copy
//     from dst (dst deleted it: the other direction deletes it on src);
//   - only on dst: the sync's copy from src whose data is unchanged is
//     deleted (src deleted it); anything else is dst's own and is copied to
//     src (by the other direction, when that one follows its log).
func (d *direction) fullSync(ctx context.Context) (uint64, error) {
	if d.cmp == nil {
		seq, err := d.src.LastSeq(ctx)
		if err != nil {
			return 0, err
		}
		d.cmp = &treeCmp{seq: seq}
		d.fullSyncs.Add(1)
	} else {
		d.log.Info("filer.sync: resuming the tree comparison", "after", d.cmp.cursor, "seq", d.cmp.seq)
	}
	t0 := time.Now()
	c0, x0 := d.copies.Load(), d.deletes.Load()
	p := &progress{cursor: d.cmp.cursor, paths: map[uint64]string{}, done: map[uint64]bool{}, ahead: d.cmp.ahead}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(d.s.cfg.Workers)
	err := d.compareDir(gctx, g, p, d.srcRoot, d.dstRoot, "", d.cmp.cursor)
	if gerr := g.Wait(); err == nil {
		err = gerr
	}
	d.cmp.cursor, d.cmp.ahead = p.last(), p.doneAhead()
	if err != nil {
		return 0, err
	}
	// Deepest first, so a parent is empty once its children are gone.
	dirs := d.cmp.emptyDirs
	slices.SortFunc(dirs, func(x, y string) int { return strings.Count(y, "/") - strings.Count(x, "/") })
	for i, dp := range dirs {
		if err := d.dst.DeleteIfEmpty(ctx, dp); err != nil {
			d.cmp.emptyDirs = dirs[i:]
			return 0, err
		}
	}
	seq := d.cmp.seq
	if len(d.cmp.back) > 0 {
		last, err := d.src.LastSeq(ctx)
		if err != nil {
			return 0, err
		}
		d.back, d.backSeq = append(d.back, d.cmp.back...), last
	}
	d.cmp = nil
	d.log.Info("filer.sync: trees compared", "copied", d.copies.Load()-c0, "deleted", d.deletes.Load()-x0,
		"took", time.Since(t0).Round(time.Millisecond), "seq", seq)
	return seq, nil
}

// compareDir compares src's directory sp with dst's dp (rel is sp relative
// to srcRoot), entry by entry in name order, skipping what the cursor
// (relative to sp) says is done.
func (d *direction) compareDir(ctx context.Context, g *errgroup.Group, p *progress, sp, dp, rel, cursor string) error {
	after := ""
	if cursor != "" {
		c0, rest, _ := strings.Cut(cursor, "/")
		se, err := d.src.Lookup(ctx, path.Join(sp, c0))
		if err != nil {
			return err
		}
		de, err := d.dst.Lookup(ctx, path.Join(dp, c0))
		if err != nil {
			return err
		}
		if err := d.comparePair(ctx, g, p, sp, dp, rel, c0, se, de, true, rest); err != nil {
			return err
		}
		after = c0
	}
	src := &lister{site: d.src, dir: sp, after: after}
	dst := &lister{site: d.dst, dir: dp, after: after}
	for {
		se, err := src.peek(ctx)
		if err != nil {
			return err
		}
		de, err := dst.peek(ctx)
		if err != nil {
			return err
		}
		var name string
		switch {
		case se == nil && de == nil:
			return nil
		case de == nil || (se != nil && path.Base(se.Path) < path.Base(de.Path)):
			name, de = path.Base(se.Path), nil
			src.next()
		case se == nil || path.Base(de.Path) < path.Base(se.Path):
			name, se = path.Base(de.Path), nil
			dst.next()
		default:
			name = path.Base(se.Path)
			src.next()
			dst.next()
		}
		if err := ctx.Err(); err != nil {
			return err // a worker failed: stop walking
		}
		if err := d.comparePair(ctx, g, p, sp, dp, rel, name, se, de, false, ""); err != nil {
			return err
		}
	}
}

// comparePair compares name in sp and dp (either entry may be nil), unless
// done, and then what is under it when it is a directory.
func (d *direction) comparePair(ctx context.Context, g *errgroup.Group, p *progress, sp, dp, rel, name string, se, de *filerpb.Entry, done bool, cursor string) error {
	csp, cdp, crel := path.Join(sp, name), path.Join(dp, name), path.Join(rel, name)
	if se == nil && de == nil || IsSystemPath(csp) || IsSystemPath(cdp) {
		return nil
	}
	sameType := se == nil || de == nil || se.IsDir == de.IsDir
	isDir := (se == nil || se.IsDir) && (de == nil || de.IsDir)
	if !done && p.ahead[crel] {
		done = true // compared before the attempt failed
	}
	if !done {
		o := p.start(crel)
		if isDir || !sameType { // inline: what is under it depends on the outcome
			if err := d.compareRetrying(ctx, se, de, csp, cdp); err != nil {
				return err
			}
			p.finish(o)
		} else {
			g.Go(func() error {
				if err := d.compareRetrying(ctx, se, de, csp, cdp); err != nil {
					return err
				}
				p.finish(o)
				return nil
			})
		}
	}
	if !sameType { // one side replaced the other: look again
		var err error
		if se, err = d.src.Lookup(ctx, csp); err != nil {
			return err
		}
		if de, err = d.dst.Lookup(ctx, cdp); err != nil {
			return err
		}
		isDir = (se == nil || se.IsDir) && (de == nil || de.IsDir) && (se != nil || de != nil)
	}
	if !isDir {
		return nil
	}
	return d.compareDir(ctx, g, p, csp, cdp, crel, cursor)
}

func (d *direction) compareRetrying(ctx context.Context, se, de *filerpb.Entry, sp, dp string) error {
	var err error
	for try := range 4 {
		if err = d.compareEntry(ctx, se, de, sp, dp); err == nil || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(100<<try) * time.Millisecond):
		}
		// Look again: the entries listed may be stale by now.
		var lerr error
		if se, lerr = d.src.Lookup(ctx, sp); lerr != nil {
			return lerr
		}
		if de, lerr = d.dst.Lookup(ctx, dp); lerr != nil {
			return lerr
		}
	}
	if err == nil && d.s.testCompared != nil {
		err = d.s.testCompared(d, sp)
	}
	return err
}

// compareEntry applies the comparison's rules (see fullSync) to one path.
func (d *direction) compareEntry(ctx context.Context, se, de *filerpb.Entry, sp, dp string) error {
	switch {
	case se != nil && de != nil:
		return d.copyEntry(ctx, se, dp)
	case se != nil:
		if m, ok := markerOf(se); ok && m.origin == d.dst.ID {
			d.skipped.Add(1) // dst deleted its original: the delete travels the other way
			return nil
		}
		return d.copyEntry(ctx, se, dp)
	case de != nil:
		if m, ok := markerOf(de); ok && m.origin == d.src.ID {
			// The sync's copy of a version src had, data unchanged since;
			// src no longer has it: deleted on src.
			if de.IsDir {
				d.cmp.addEmptyDir(dp)
				return nil
			}
			if now, err := d.src.Lookup(ctx, sp); err != nil || now != nil {
				return err // src has it again: its own event brings it
			}
			if err := d.dst.Delete(ctx, dp); err != nil {
				return err
			}
			d.deletes.Add(1)
			return nil
		}
		// dst's own: it travels to src by the other direction. When that
		// one follows its log, it may have applied this entry's event long
		// ago, and src deleted it since: if the delete is in src's log
		// after the comparison's position, this direction applies it soon;
		// if not (trimmed), nothing can tell, and the entry is copied back
		// once this direction has caught up (drainBack), so the trees
		// agree. While the other direction compares the trees itself, it
		// copies the entry there.
		if d.s.other(d).started.Load() {
			d.cmp.addBack(sp, dp)
		}
		return nil
	}
	return nil
}

func (c *treeCmp) addEmptyDir(p string) {
	c.mu.Lock()
	c.emptyDirs = append(c.emptyDirs, p)
	c.mu.Unlock()
}

// drainBack copies to src the entries a tree comparison found only on dst
// and dst's own, if they still are once the events up to the comparison's
// end are applied (a delete among them removed the others).
func (d *direction) drainBack(ctx context.Context) error {
	if len(d.back) == 0 || d.seq.Load() < d.backSeq {
		return nil
	}
	back := d.s.other(d)
	for len(d.back) > 0 {
		sp, dp := d.back[0][0], d.back[0][1]
		se, err := d.src.Lookup(ctx, sp)
		if err != nil {
			return err
		}
		de, err := d.dst.Lookup(ctx, dp)
		if err != nil {
			return err
		}
		if se == nil && de != nil {
			if m, ok := markerOf(de); !ok || m.origin != d.src.ID {
				if err := back.copyEntry(ctx, de, sp); err != nil {
					return err
				}
			}
		}
		d.back = d.back[1:]
	}
	d.back = nil
	return nil
}

// lister reads one directory of a site page by page.
type lister struct {
	site       *Site
	dir, after string
	page       []*filerpb.Entry
	eof        bool
}

func (l *lister) peek(ctx context.Context) (*filerpb.Entry, error) {
	if len(l.page) == 0 && !l.eof {
		page, err := l.site.ListPage(ctx, l.dir, l.after, listPage)
		if err != nil {
			return nil, err
		}
		l.page, l.eof = page, len(page) < listPage
		if len(page) > 0 {
			l.after = path.Base(page[len(page)-1].Path)
		}
	}
	if len(l.page) == 0 {
		return nil, nil
	}
	return l.page[0], nil
}

func (l *lister) next() { l.page = l.page[1:] }

// progress tracks which entries of a comparison are done, in walk order,
// with several compared at once: last is the furthest entry such that it
// and every entry before it are done.
type progress struct {
	mu        sync.Mutex
	next, low uint64
	paths     map[uint64]string
	done      map[uint64]bool
	cursor    string
	ahead     map[string]bool // read only: the previous attempt's doneAhead
}

func (p *progress) start(rel string) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	o := p.next
	p.next++
	p.paths[o] = rel
	return o
}

func (p *progress) finish(o uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done[o] = true
	for p.done[p.low] {
		p.cursor = p.paths[p.low]
		delete(p.done, p.low)
		delete(p.paths, p.low)
		p.low++
	}
}

func (p *progress) last() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cursor
}

// doneAhead: the entries after last that are done, and those the previous
// attempt had done that this one did not reach.
func (p *progress) doneAhead() map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]bool{}
	for o := range p.done {
		out[p.paths[o]] = true
	}
	for rel := range p.ahead {
		if walkBefore(p.cursor, rel) {
			out[rel] = true
		}
	}
	return out
}

// walkBefore reports whether relative path x comes before y in the
// comparison's walk order: by path components, a parent before its
// children, names in byte order.
func walkBefore(x, y string) bool {
	xs, ys := strings.Split(x, "/"), strings.Split(y, "/")
	if x == "" {
		return y != ""
	}
	for i := 0; i < len(xs) && i < len(ys); i++ {
		if xs[i] != ys[i] {
			return xs[i] < ys[i]
		}
	}
	return len(xs) < len(ys)
}
