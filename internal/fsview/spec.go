package fsview

import (
	"context"
	"path"
	"slices"
	"sync"
	"syscall"

	"google.golang.org/protobuf/proto"

	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// A speculative fetch reads a small file's content from the entry the
// metadata cache holds, before the filer has confirmed that entry: the
// open of a file not open here asks the filer for the entry (close-to-open
// consistency, openNode), and the fetch overlaps that round trip instead
// of waiting for it. Its bytes are used only if the entry the file is then
// opened with has the same content (sameContent): the same size and the
// same chunks, whose bytes never change (a chunk's file id is written once;
// new data always gets a new one). Otherwise it is dropped and the file is
// fetched again from the entry the filer gave, so nothing older than the
// open is ever read.
type specFetch struct {
	entry *filerpb.Entry // as cached when the fetch started
	n     *prefetch      // covering the whole file
}

// speculate starts fetching the whole content of e, a cached entry of a
// file about to be opened for reading, if it is small (at most readAhead,
// as prefetchSmall fetches) and has no manifest chunk (resolving one would
// be a fetch of its own); nil if it does not qualify.
func (fs *FS) speculate(e *filerpb.Entry) *specFetch {
	if e == nil || e.IsDir || e.Size <= 0 || e.Size > readAhead {
		return nil
	}
	cs := chunksOf(e)
	for _, c := range cs {
		if c.Manifest {
			return nil
		}
	}
	return &specFetch{entry: e, n: fs.fetchWhole(cs, e.Size)}
}

// sameContent reports whether entries a and b read the same bytes: the same
// size and the same chunks, in the same order (chunk.Visible orders
// overlapping chunks by their mtime, so equal lists resolve alike).
func sameContent(a, b *filerpb.Entry) bool {
	if a.Size != b.Size || len(a.Chunks) != len(b.Chunks) {
		return false
	}
	for i := range a.Chunks {
		if !proto.Equal(a.Chunks[i], b.Chunks[i]) {
			return false
		}
	}
	return true
}

// OpenForReading is Open for a reader about to read the file (the FUSE
// mount's open(2) read-only, which the kernel follows with READs): a small
// file (at most 4 MiB) is fetched whole in the background (prefetchSmall).
// When the entry came from the metadata cache, the fetch starts from it
// while the open asks the filer for the entry, and is kept if the filer's
// entry has the same content (see specFetch); the first READ then waits for
// a fetch that began a round trip earlier. Not for opens that may not read
// (WebDAV's PROPFIND opens every file it lists): those use Open.
func (fs *FS) OpenForReading(ctx context.Context, p string, flags int) (*Handle, error) {
	n, gen, err := fs.resolveFile(ctx, p)
	if err != nil {
		return nil, err
	}
	rdonly := flags&syscall.O_ACCMODE == syscall.O_RDONLY
	var spec *specFetch
	if rdonly {
		spec = fs.walk.take(n.contentPath())
		if spec == nil && n.cached && fs.openFile(n.contentPath()) == nil {
			spec = fs.speculate(n.content)
		}
	}
	h, err := fs.openNode(ctx, n, p, flags, gen)
	if err != nil {
		return nil, err // a fetch started is left to finish and to the GC
	}
	if rdonly {
		h.f.prefetchSmall(ctx, spec)
		if n.linkID == "" {
			fs.walkAhead(n.name.Path)
		}
	}
	return h, nil
}

// Reading the files of a directory one after the other in name order (cat
// dir/*, whose glob is sorted; cp -r, tar, grep -r, which take the filer's
// listing order, the same) is latency-bound: each file's fetch starts only
// at its open. Once two files of one directory have been opened for reading
// in ascending name order, the next aheadFiles names of its listing are
// fetched speculatively from their cached entries, as OpenForReading does
// for the file it opens: a fetch is used only by a later open of that name
// for reading, and only if the entry the filer gives that open has the same
// content (specFetch), so a file changed meanwhile is read as the filer has
// it at the open. The listing must be known whole (metaCache.listed: the
// directory was listed here and its events followed). One walk is followed
// at a time, mount-wide; a fetch ahead that is never used is dropped when
// the walk moves past it or another starts (its bytes left to the GC).
const aheadFiles = 2

// dirWalk is the walk through one directory's files being followed.
type dirWalk struct {
	mu    sync.Mutex
	dir   string                // filer path of the directory
	last  string                // the name opened last
	names []string              // the directory's names in order (a snapshot), once a walk is seen
	ahead map[string]*specFetch // fetches ahead by filer path
}

// take returns (and forgets) the fetch ahead of the file at filer path
// full, if any.
func (w *dirWalk) take(full string) *specFetch {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.ahead[full]
	delete(w.ahead, full)
	return s
}

// walkAhead notes the open for reading of the file at filer path full, and
// fetches ahead if it continues a walk (see aheadFiles).
func (fs *FS) walkAhead(full string) {
	w := &fs.walk
	dir, name := path.Dir(full), path.Base(full)
	w.mu.Lock()
	defer w.mu.Unlock()
	if dir != w.dir || name <= w.last {
		// Not (or no longer) a walk: start over from this file.
		w.dir, w.last, w.names, w.ahead = dir, name, nil, nil
		return
	}
	w.last = name
	if w.names == nil {
		if w.names = fs.cache.listed(dir); w.names == nil {
			return // the listing is not known whole: nothing to walk along
		}
	}
	i, found := slices.BinarySearch(w.names, name)
	if found {
		i++
	}
	keep := make(map[string]*specFetch, aheadFiles)
	for _, next := range w.names[i:min(i+aheadFiles, len(w.names))] {
		p := path.Join(dir, next)
		if s := w.ahead[p]; s != nil {
			keep[p] = s
			continue
		}
		e, ok := fs.cache.get(p)
		if !ok || len(e.Xattrs[xattrLink]) > 0 || fs.openFile(p) != nil {
			continue
		}
		if s := fs.speculate(e); s != nil {
			keep[p] = s
		}
	}
	w.ahead = keep // those left behind are dropped (left to the GC)
}
