package fsview

import (
	"path"
	"sync"
	"time"
)

// dirTouches remembers when this view last added a name to or removed one
// from each directory. The filer moves a directory's mtime and ctime
// itself, but to within a second (it skips the rewrite when both are less
// than a second old) and, for a create answered early (Config.AsyncCreate),
// only when the create reaches it; a stat of the directory right after a
// change made here must show the change (make, and tests such as
// pjdfstest, compare the times before and after).
type dirTouches struct {
	mu sync.Mutex
	at map[string]time.Time // full path of a directory → last change of its names here
}

// maxTouches bounds dirTouches: past it, touches older than touchKept are
// forgotten (the filer's own times have caught up with them by then, to
// within its second).
const (
	maxTouches = 4096
	touchKept  = time.Minute
)

// namesChanged records a change of the names in the parent directory of
// each of the full paths.
func (d *dirTouches) namesChanged(fulls ...string) {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.at == nil {
		d.at = map[string]time.Time{}
	}
	if len(d.at) >= maxTouches {
		for p, t := range d.at {
			if now.Sub(t) > touchKept {
				delete(d.at, p)
			}
		}
	}
	for _, p := range fulls {
		d.at[path.Dir(p)] = now
	}
}

// forget drops the touch of directory full: its mtime was just set
// explicitly (utimens), which a later change of names overrides, an
// earlier one not.
func (d *dirTouches) forget(full string) {
	d.mu.Lock()
	delete(d.at, full)
	d.mu.Unlock()
}

// apply moves a's mtime and ctime up to the last change of the names in
// directory full made here.
func (d *dirTouches) apply(full string, a *Attr) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.at[full]
	if !ok {
		return
	}
	if !t.After(a.Mtime) && !t.After(a.Ctime) {
		delete(d.at, full) // the filer's times have caught up
		return
	}
	if t.After(a.Mtime) {
		if a.Atime.Equal(a.Mtime) {
			a.Atime = t // atime reads as mtime unless utimens set it (attrOf)
		}
		a.Mtime = t
	}
	if t.After(a.Ctime) {
		a.Ctime = t
	}
}
