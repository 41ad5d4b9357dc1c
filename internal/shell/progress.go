package shell

import "sync"

// Progress is how far a running maintenance command got, in figures, for a
// caller that shows them (the admin UI) rather than the output lines.
type Progress struct {
	// Unit names what Done and Total count: "steps" (volume copies and
	// deletions of volume.fix.replication and volume.balance), "volumes"
	// (ec.encode) or "shards" (ec.rebuild, ec.balance).
	Unit string
	// Done counts finished items, Failed those of them that failed;
	// Total is the plan's size.
	Done, Failed, Total int
	// Bytes is what the volume servers copied or encoded so far.
	Bytes uint64
}

// ProgressReporter is an Out writer that also takes figures: when
// Config.Out implements it, commands that apply a plan report their
// progress through it.
type ProgressReporter interface {
	ReportProgress(Progress)
}

// tracker feeds a ProgressReporter; nil (Out is a plain writer) does
// nothing.
type tracker struct {
	mu     sync.Mutex
	p      Progress
	report func(Progress)
}

func newTracker(out any) *tracker {
	if r, ok := out.(ProgressReporter); ok {
		return &tracker{report: r.ReportProgress}
	}
	return nil
}

func (t *tracker) update(f func(p *Progress)) {
	if t == nil {
		return
	}
	t.mu.Lock()
	f(&t.p)
	p := t.p
	t.mu.Unlock()
	t.report(p)
}

// plan starts counting a plan of total items.
func (t *tracker) plan(unit string, total int) {
	t.update(func(p *Progress) { *p = Progress{Unit: unit, Total: total} })
}

// done counts n finished items.
func (t *tracker) done(n int, failed bool) {
	t.update(func(p *Progress) {
		p.Done += n
		if failed {
			p.Failed += n
		}
	})
}

func (t *tracker) bytes(n uint64) {
	if n > 0 {
		t.update(func(p *Progress) { p.Bytes += n })
	}
}

// countingProgress adds a stream's advance to the tracker's bytes and
// passes it on to the shown progress (nil: none shown).
type countingProgress struct {
	shown progress
	t     *tracker
	last  uint64
}

func (c *countingProgress) update(done, total uint64) {
	if done > c.last {
		c.t.bytes(done - c.last)
		c.last = done
	}
	if c.shown != nil {
		c.shown.update(done, total)
	}
}

func (c *countingProgress) finish() {
	if c.shown != nil {
		c.shown.finish()
	}
}
