package fsview

import (
	"context"
	"errors"
	"io"
	"slices"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

var ioEOF = io.EOF

// Buffer limits of one open file.
const (
	// maxPending is how many uploaded but uncommitted chunks a file keeps
	// before it commits them: their bytes stay in memory until then.
	maxPending = 8
	// readAhead is what a sequential read fetches at once.
	readAhead = 4 << 20
	// minRead is the least a read fetches from the volume servers.
	minRead = 128 << 10
)

// file is the state of one file open here, shared by all its handles: the
// entry as last committed, and the write-back buffer on top of it (dirty
// blocks not yet uploaded, then uploads not yet committed).
type file struct {
	fs *FS
	mu sync.Mutex

	path     string         // content path in the filer
	entry    *filerpb.Entry // as committed
	resolved []chunk.Chunk  // entry.Chunks with manifests expanded (nil: not yet)
	size     int64          // with buffered writes
	mtime    time.Time
	dirty    bool // size, mtime or data differ from entry

	blocks  map[int64]*block // dirty data by block index (block = chunk size)
	pending []*upload        // in write order
	err     error            // a failed upload, reported by the next flush

	// version counts the changes of the committed content (entry, resolved):
	// a read that fetched without the lock retries if it moved meanwhile.
	version uint64

	// ras are the read-ahead buffers of committed content, the last one
	// adopted last: at most maxBuffered, the one furthest back let go
	// first (READs come a little late, and their fetches are adopted out
	// of order).
	ras     []raBuf
	fetches []*prefetch // fetches of committed content on their way
	lastEnd int64       // end of the last read, to see sequential reads

	refs     int
	unlinked bool // removed from the namespace: delete at the last release
	// queued: released by its last handle with its commit still to come
	// (releaseLater); changes of attributes then join that commit.
	queued  bool
	lateErr error // a background commit failed: told to the next flush
	// created: the create of the entry answered early (Config.AsyncCreate),
	// set when the file is made and not changed after (read without mu);
	// nil if the entry was there at open.
	created *asyncCreate
	// createErr: the filer refused that create. The file is then no longer
	// open here under its name (fileAt), its buffer is dropped, and every
	// write and commit through its handles fails with this.
	createErr error
	// forgotten: no longer open here (its last release or background
	// commit done, or its create refused). A change of attributes that
	// found the file just before goes to the filer's entry instead
	// (errForgotten): joining a commit that will not come would lose it.
	forgotten bool
}

// errForgotten: the file was forgotten while the caller waited for it.
var errForgotten = errors.New("fsview: the open file was forgotten meanwhile")

// block is the dirty part of one chunk-sized, chunk-aligned block.
type block struct {
	data  []byte // from the block's start, as long as the last dirty byte
	dirty []ival // sorted, disjoint, in block offsets
	start int64  // file offset of data[0]
}

type ival struct{ lo, hi int64 }

// upload is one chunk on its way to a volume server.
type upload struct {
	off  int64
	data []byte
	done chan struct{}
	fid  string
	key  []byte // the chunk's cipher key when sealed (encryption at rest)
	err  error
	at   int64 // mtime ns of the chunk
}

// acquire opens the content path cp here (or counts one more user).
func (fs *FS) acquire(ctx context.Context, cp string) (*file, error) {
	return fs.acquireEntry(ctx, cp, nil, 0)
}

// forgetGen is read before looking up an entry that is then passed to
// acquireEntry.
func (fs *FS) forgetGen() uint64 {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.forgets
}

// acquireEntry is acquire with the entry at cp when the caller has just
// read or written it (nil: look it up), with forgetGen read before. If a
// file was forgotten since (its commit done), e may be older than that
// commit and is looked up again.
func (fs *FS) acquireEntry(ctx context.Context, cp string, e *filerpb.Entry, gen uint64) (*file, error) {
	fs.mu.Lock()
	if f := fs.fileAt(cp); f != nil {
		f.refs++
		fs.mu.Unlock()
		return f, nil
	}
	if fs.forgets != gen {
		e = nil
	}
	fs.mu.Unlock()
	if e == nil {
		var err error
		if e, err = fs.lookupFresh(ctx, cp); err != nil {
			return nil, err
		}
	}
	if e.IsDir {
		return nil, errnof(syscall.EISDIR, "%s", cp)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f := fs.fileAt(cp); f != nil { // opened meanwhile
		f.refs++
		return f, nil
	}
	f := &file{fs: fs, path: cp, entry: e, size: e.Size, mtime: timeOf(e.MtimeNs), blocks: map[int64]*block{}, refs: 1}
	fs.files[cp] = f
	return f, nil
}

// fileAt returns the file open here at content path cp, if any, with
// fs.mu held. A file whose create answered early was refused is not open
// under that name: it is dropped from fs.files here (its handles keep it).
func (fs *FS) fileAt(cp string) *file {
	f := fs.files[cp]
	if f != nil && f.created.refused() {
		delete(fs.files, cp)
		fs.forgets++
		return nil
	}
	return f
}

// acquireNew opens here the new entry e, whose create c is on its way
// (Config.AsyncCreate): the file is registered with c, so that its first
// commit, through any handle, waits for it. nil if a file is open at cp
// already (the caller then creates as usual).
func (fs *FS) acquireNew(e *filerpb.Entry, c *asyncCreate) *file {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.fileAt(e.Path) != nil {
		return nil
	}
	f := &file{fs: fs, path: e.Path, entry: e, size: e.Size, mtime: timeOf(e.MtimeNs), blocks: map[int64]*block{}, refs: 1, created: c}
	fs.files[e.Path] = f
	return f
}

// releaseLater drops one user of f; after the last one, f is committed in
// the background and then forgotten. Until then f stays open here, so that
// this view reads what was written (and an fsync, a rename, an unlink or a
// Sync commits it at once). At most cap(fs.commits) commits run at a time;
// more wait here.
func (fs *FS) releaseLater(f *file) {
	fs.mu.Lock()
	f.refs--
	last := f.refs == 0
	fs.mu.Unlock()
	if !last {
		return
	}
	f.mu.Lock()
	f.queued = true
	f.mu.Unlock()
	fs.commits <- struct{}{}
	fs.workers.run(func() {
		defer func() { <-fs.commits }()
		fs.finish(f)
	})
}

// finish commits f, queued by releaseLater, and forgets it unless it was
// opened again meanwhile.
func (fs *FS) finish(f *file) {
	ctx := deferred(context.Background())
	for {
		err := f.flush(ctx)
		if err != nil {
			fs.log.Warn("fsview: background commit failed; the data written is lost", "path", f.currentPath(), "err", err)
			f.mu.Lock()
			f.lateErr = err
			f.mu.Unlock()
		}
		switch fs.forgetCommitted(f, err) {
		case again:
			continue
		case forgotten:
			if err := fs.deleteUnlinked(ctx, f); err != nil {
				fs.log.Warn("fsview: removing an unlinked file", "path", f.currentPath(), "err", err)
			}
		}
		return
	}
}

// What forgetCommitted did.
type forgetOutcome int

const (
	forgotten forgetOutcome = iota
	reopened                // opened again meanwhile: its next last release takes over
	again                   // changed since the last commit: commit again, then ask again
)

// forgetCommitted forgets f, whose last user is gone, once nothing is left
// to commit: an attribute change may join f while a commit is on its way
// (file.modify), and f must stay open here until that change is in the
// filer too, else a lookup would read the filer's older entry. err is the
// last commit's outcome: after a failure f is forgotten all the same.
func (fs *FS) forgetCommitted(f *file, err error) forgetOutcome {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refs > 0 {
		f.queued = false
		return reopened
	}
	if err == nil && (f.dirty || len(f.blocks) > 0 || len(f.pending) > 0) {
		return again
	}
	f.queued = false
	f.forgotten = true
	f.dropReadAhead() // no handle is left to read it
	if fs.files[f.path] == f {
		delete(fs.files, f.path)
		fs.forgets++
	}
	return forgotten
}

// deleteUnlinked removes the entry of f, forgotten, if it was unlinked
// while open (hideOpen keeps it until then).
func (fs *FS) deleteUnlinked(ctx context.Context, f *file) error {
	f.mu.Lock()
	unlinked, p := f.unlinked, f.path
	f.mu.Unlock()
	if !unlinked {
		return nil
	}
	if err := fs.delete(ctx, p, false); err != nil && !isNotFound(err) {
		return err
	}
	return nil
}

// Sync commits every file written here, those closed and waiting for
// their background commit included (syncfs, unmount).
func (fs *FS) Sync(ctx context.Context) error {
	fs.mu.Lock()
	files := make([]*file, 0, len(fs.files))
	for _, f := range fs.files {
		files = append(files, f)
	}
	fs.mu.Unlock()
	var first error
	for _, f := range files {
		if err := f.flush(ctx); err != nil && first == nil {
			first = err
		}
	}
	fs.settle() // a create whose file had nothing to commit
	if err := fs.syncFiler(ctx); err != nil && first == nil {
		first = err
	}
	return first
}

// release drops one user of f; the last one commits and forgets it.
func (fs *FS) release(ctx context.Context, f *file) error {
	err := f.flush(ctx)
	fs.mu.Lock()
	f.refs--
	last := f.refs == 0
	fs.mu.Unlock()
	if !last {
		return err
	}
	for {
		switch fs.forgetCommitted(f, err) {
		case again:
			err = f.flush(ctx)
			continue
		case forgotten:
			if derr := fs.deleteUnlinked(ctx, f); err == nil {
				err = derr
			}
		}
		return err
	}
}

func (f *file) setPath(p string) {
	f.mu.Lock()
	f.path = p
	f.entry.Path = p
	f.mu.Unlock()
}

func (f *file) currentPath() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.path
}

func (f *file) sizeAndMtime() (int64, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.size, f.mtime
}

// attrs is what attrOf takes from an open file.
func (f *file) attrs() (mode, uid, gid uint32, size int64, mtime time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.entry.Mode, f.entry.Uid, f.entry.Gid, f.size, f.mtime
}

func (f *file) entrySnapshot() *filerpb.Entry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return cloneEntry(f.entry)
}

// write stores p at off in the buffer. Blocks that become whole are
// uploaded in the background at once.
func (f *file) write(ctx context.Context, p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.createFailure(); err != nil {
		return 0, err
	}
	if err := f.err; err != nil {
		f.err = nil
		return 0, err
	}
	bs := int64(f.fs.chunkSize)
	n := 0
	for n < len(p) {
		pos := off + int64(n)
		idx := pos / bs
		b := f.blocks[idx]
		if b == nil {
			b = &block{start: idx * bs}
			f.blocks[idx] = b
		}
		in := pos - b.start
		m := min(int64(len(p)-n), bs-in)
		if need := in + m; int64(len(b.data)) < need {
			b.data = growBlock(b.data, need, bs, m, b.start == 0)
		}
		copy(b.data[in:in+m], p[n:n+int(m)])
		b.dirty = addIval(b.dirty, ival{in, in + m})
		n += int(m)
		if len(b.dirty) == 1 && b.dirty[0].lo == 0 && b.dirty[0].hi == bs {
			delete(f.blocks, idx)
			f.startUpload(b.start, b.data, false)
		}
	}
	f.size = max(f.size, off+int64(len(p)))
	f.mtime = time.Now()
	f.dirty = true
	f.dropReadAhead()
	if len(f.pending) >= maxPending {
		if err := f.commitUploaded(ctx); err != nil {
			return n, err
		}
	}
	return n, nil
}

// growBlock makes data need bytes long for a write of m bytes into a block
// of bs. The first block of a file starts at the size of its first write:
// a small file written in one piece then holds no more than it needs. After
// that, a large write (dd's 1 MiB) gets the whole block at once; a middling
// one (cp and cat write st_blksize, 128 KiB, at a time) multiplies the
// capacity by 8, so that a file of 1 MiB written in 128 KiB pieces is
// copied once (128 KiB), not at every doubling (896 KiB); small writes
// double it, so that a block filled by many writes is copied a few times,
// not at every write. Buffers come from the pool (getBuf, not cleared); the
// one outgrown goes back to it.
func growBlock(data []byte, need, bs, m int64, first bool) []byte {
	if need <= int64(cap(data)) {
		return data[:need]
	}
	var c int64
	switch {
	case first && len(data) == 0:
		c = need
	case m >= bs/8:
		c = bs
	case m >= bs/128:
		c = 8 * int64(cap(data))
	default:
		c = 2 * int64(cap(data))
	}
	c = min(max(c, need), bs)
	nd := getBuf(int(c))[:need]
	copy(nd, data)
	putBuf(data)
	return nd
}

// commitUploaded commits the uploads at the head of the queue that are
// done (waiting for the first one only), so that a long write keeps its
// other uploads in flight while its memory stays bounded. The committed
// size covers the chunks committed; the rest stays buffered.
func (f *file) commitUploaded(ctx context.Context) error {
	if err := f.waitCreated(); err != nil {
		return err
	}
	<-f.pending[0].done
	k := 1
	for k < len(f.pending) {
		select {
		case <-f.pending[k].done:
			k++
			continue
		default:
		}
		break
	}
	for _, u := range f.pending[:k] {
		if u.err != nil {
			return f.commitLocked(ctx) // reports the failure as a flush does
		}
	}
	e := cloneEntry(f.entry)
	for _, u := range f.pending[:k] {
		e.Chunks = append(e.Chunks, &filerpb.Chunk{Fid: u.fid, Offset: u.off, Size: int64(len(u.data)), MtimeNs: u.at, CipherKey: u.key})
		e.Size = max(e.Size, u.off+int64(len(u.data)))
	}
	e.MtimeNs = f.mtime.UnixNano()
	e.Md5 = nil
	e.Etag = ""
	// A commit in the middle of a write is no durability point: the filer
	// need not sync it before answering (fsync asks it to, Handle.Fsync).
	// It may be the file's first commit, which sends a create still held.
	if err := f.store(deferred(ctx), e); err != nil {
		return err
	}
	f.entry = e
	f.version++
	for _, u := range f.pending[:k] {
		u.recycle()
	}
	f.pending = slices.Delete(f.pending, 0, k)
	f.resolved = nil
	f.dropReadAhead()
	return nil
}

// addIval merges v into the sorted disjoint list s.
func addIval(s []ival, v ival) []ival {
	out := s[:0:0]
	for _, x := range s {
		switch {
		case x.hi < v.lo || x.lo > v.hi:
			out = append(out, x)
		default:
			v.lo, v.hi = min(v.lo, x.lo), max(v.hi, x.hi)
		}
	}
	out = append(out, v)
	sort.Slice(out, func(i, j int) bool { return out[i].lo < out[j].lo })
	return out
}

// recycle gives the buffer of a committed upload back to the pool: the
// upload is done (PutChunk returned) and no longer in f.pending. A failed
// one is left to the GC (an HTTP request given up may still hold its body).
func (u *upload) recycle() {
	if u.err == nil {
		putBuf(u.data)
		u.data = nil
	}
}

// dropReadAhead lets go of the read-ahead buffers (back to the pool once
// no READ reply sends from them) and forgets the fetches on their way (left
// to the GC: their goroutines may still be filling them, and readers
// waiting for them find them gone and fetch again).
func (f *file) dropReadAhead() {
	for _, r := range f.ras {
		r.buf.release()
	}
	f.ras, f.fetches = nil, nil
}

// raBuf is a read-ahead buffer holding the committed content at off.
type raBuf struct {
	buf *sharedBuf
	off int64
}

func (r raBuf) end() int64 { return r.off + int64(len(r.buf.b)) }

// maxBuffered is how many read-ahead buffers a file keeps.
const maxBuffered = 3

// setReadAhead adds buf at off to the read-ahead buffers, letting go of
// the one furthest back if there are too many; the file takes over the
// caller's reference.
func (f *file) setReadAhead(buf *sharedBuf, off int64) {
	f.ras = append(f.ras, raBuf{buf, off})
	if len(f.ras) > maxBuffered {
		lo := 0
		for i, r := range f.ras {
			if r.off < f.ras[lo].off {
				lo = i
			}
		}
		f.ras[lo].buf.release()
		f.ras = slices.Delete(f.ras, lo, lo+1)
	}
}

// startUpload uploads data as the chunk at off in the background. With
// unhurried (the uploads close starts, which the file's commit after its
// last close waits for, and nobody else) the volume server may let the
// fsync it answers after wait a few milliseconds for other uploads to share
// it: a copy closes its files one after the other, and each upload would
// otherwise get an fsync of its own.
func (f *file) startUpload(off int64, data []byte, unhurried bool) {
	u := &upload{off: off, data: data, done: make(chan struct{}), at: time.Now().UnixNano()}
	f.pending = append(f.pending, u)
	ctx := context.Background()
	if unhurried {
		ctx = withUnhurriedUpload(ctx)
	}
	f.fs.workers.run(func() {
		defer close(u.done)
		w := uploadWeight(len(u.data))
		_ = f.fs.uploads.Acquire(context.Background(), w) // cannot fail: the context is never done
		defer f.fs.uploads.Release(w)
		u.fid, u.key, u.err = chunk.PutChunk(ctx, f.fs.putter, u.data, f.fs.encrypt)
	})
}

// read fills p from off with the file's content as this mount sees it.
// The lock is let go while chunks are fetched, so that reads of other
// ranges (the kernel sends several at once) and writes go on meanwhile.
func (f *file) read(ctx context.Context, p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.readLocked(ctx, p, off)
}

func (f *file) readLocked(ctx context.Context, p []byte, off int64) (int, error) {
	for {
		if off >= f.size {
			return 0, io.EOF
		}
		n := int(min(int64(len(p)), f.size-off))
		q := p[:n]
		err := f.readCommitted(ctx, q, off, true)
		if err == errMoved {
			continue // committed meanwhile: what was fetched may be stale
		}
		if err != nil {
			return 0, err
		}
		f.overlay(q, off)
		f.lastEnd = off + int64(n)
		return n, nil
	}
}

// readShared is read, answered when it can with a slice of a read-ahead
// buffer rather than a copy into p: when the range is committed content
// and nothing buffered here lies over it. The slice stays valid until
// release (nil when the answer is in p) is called. A READ reply then goes
// from the buffer the volume server's answer was read into straight to the
// kernel: a copy of each byte less.
func (f *file) readShared(ctx context.Context, p []byte, off int64) ([]byte, *sharedBuf, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		if off >= f.size {
			return nil, nil, io.EOF
		}
		end := off + min(int64(len(p)), f.size-off)
		if end > f.entry.Size || len(f.pending) > 0 || len(f.blocks) > 0 {
			n, err := f.readLocked(ctx, p, off)
			return p[:n], nil, err
		}
		b, bOff, err := f.committedBuf(ctx, off, end, true)
		if err == errMoved {
			continue // committed meanwhile: what was fetched may be stale
		}
		if err != nil {
			return nil, nil, err
		}
		data := b.b[off-bOff : end-bOff]
		f.lastEnd = end
		if len(f.pending) > 0 || len(f.blocks) > 0 {
			// Written while the fetch was waited for unlocked.
			q := p[:len(data)]
			copy(q, data)
			b.release()
			f.overlay(q, off)
			return q, nil, nil
		}
		return data, b, nil
	}
}

// overlay copies the buffered bytes over p (file offset off): uploads in
// write order, then the dirty blocks, which are newer than any upload.
func (f *file) overlay(p []byte, off int64) {
	end := off + int64(len(p))
	for _, u := range f.pending {
		copyRange(p, off, end, u.data, u.off)
	}
	for _, b := range f.blocks {
		for _, d := range b.dirty {
			copyRange(p, off, end, b.data[d.lo:d.hi], b.start+d.lo)
		}
	}
}

// copyRange copies the part of src (at file offset soff) that falls in
// [off, end) into dst (at file offset off).
func copyRange(dst []byte, off, end int64, src []byte, soff int64) {
	lo, hi := max(off, soff), min(end, soff+int64(len(src)))
	if lo < hi {
		copy(dst[lo-off:hi-off], src[lo-soff:hi-soff])
	}
}

// errMoved: the committed content changed while a read waited unlocked.
var errMoved = errors.New("fsview: committed content changed during a read")

// readCommitted fills p with the committed content at off (zeros past
// the committed size), through the read-ahead buffers. With unlock, f.mu
// is let go while it waits for the volume servers (errMoved if the
// committed content changed meanwhile).
//
// The kernel sends the READs of a sequential reader several at a time and
// not always in order (its read-ahead, Options.ReadAheadKB in the FUSE
// mount). A read that misses the buffers waits for a fetch on its way that
// covers it (f.fetches) rather than fetching the same bytes again, and the
// buffers behind the newest are kept for READs that come late.
func (f *file) readCommitted(ctx context.Context, p []byte, off int64, unlock bool) error {
	csize := f.entry.Size
	if off >= csize {
		clear(p)
		return nil
	}
	end := min(off+int64(len(p)), csize)
	b, bOff, err := f.committedBuf(ctx, off, end, unlock)
	if err != nil {
		return err
	}
	copy(p, b.b[off-bOff:end-bOff])
	b.release()
	clear(p[end-off:]) // past the committed size
	return nil
}

// committedBuf returns a buffer holding the committed content [off, end)
// (end at most the committed size) at file offset bOff, with a reference
// for the caller to release; see readCommitted.
func (f *file) committedBuf(ctx context.Context, off, end int64, unlock bool) (*sharedBuf, int64, error) {
	csize := f.entry.Size
	seq := off > 0 && f.nearStream(off)
	for {
		if buf, bOff := f.buffered(off, end); buf != nil {
			buf.hold()
			if seq {
				f.prefetchAfter(end, csize)
			}
			return buf, bOff, nil
		}
		if n := f.fetchCovering(off, end); n != nil && unlock {
			if err := f.waitUnlocked(true, func() error { <-n.done; return nil }); err != nil {
				return nil, 0, err
			}
			// Its buffer is the read-ahead buffer now (or n failed and is
			// dropped, and this read fetches for itself next time round).
			f.adopt(n)
			continue
		}
		break
	}
	want := int64(minRead)
	if seq {
		want = readAhead // sequential: fetch ahead
	}
	if off == 0 && csize <= readAhead {
		want = csize // a small file read from its start is read whole: one request
	}
	fetchEnd := min(max(end, off+want), f.nextFetch(end, csize))
	if err := f.resolve(ctx); err != nil {
		return nil, 0, err
	}
	f.fs.readMisses.Add(1)
	buf := newSharedBuf(int(fetchEnd - off))
	r := chunk.NewReader(ctx, f.fs.reader, f.resolved, csize)
	if !unlock {
		if err := readFull(r, buf.b, off); err != nil {
			buf.release()
			return nil, 0, err
		}
		buf.hold()
		f.setReadAhead(buf, off)
		return buf, off, nil
	}
	n := &prefetch{off: off, end: fetchEnd, buf: buf, done: make(chan struct{})}
	// This read's reference, taken before n is on f.fetches: a READ
	// waiting for n may adopt it first, and the file let it go, before
	// this one has the lock again. (If n is dropped meanwhile, its first
	// reference is never released and the buffer is left to the GC.)
	buf.hold()
	f.fetches = append(f.fetches, n)
	if err := f.waitUnlocked(true, func() error {
		n.err = readFull(r, buf.b, off)
		close(n.done)
		return n.err
	}); err != nil {
		if err != errMoved {
			f.adopt(n) // failed: out of f.fetches (buf left to the GC)
		}
		buf.release()
		return nil, 0, err
	}
	f.adopt(n)
	if seq {
		f.prefetchAfter(end, csize)
	}
	return buf, off, nil
}

// nearStream reports whether a read at off continues a sequential reader:
// near the end of the last read or of the read-ahead buffer (the kernel's
// READs come out of order by a little).
func (f *file) nearStream(off int64) bool {
	near := func(at int64) bool { return off >= at-readAhead && off <= at+readAhead }
	if f.lastEnd > 0 && near(f.lastEnd) {
		return true
	}
	for _, r := range f.ras {
		if near(r.end()) {
			return true
		}
	}
	for _, n := range f.fetches {
		if near(n.end) {
			return true
		}
	}
	return false
}

// buffered returns the read-ahead buffer (and its offset) holding
// [off, end), if one does.
func (f *file) buffered(off, end int64) (*sharedBuf, int64) {
	for _, r := range f.ras {
		if off >= r.off && end <= r.end() {
			return r.buf, r.off
		}
	}
	return nil, 0
}

// nextFetch returns where the first fetch on its way that starts at or
// after at begins (limit if none): a fetch ahead stops there, so that READs
// arriving out of order do not fetch the same bytes twice.
func (f *file) nextFetch(at, limit int64) int64 {
	for _, n := range f.fetches {
		if n.off >= at && n.off < limit {
			limit = n.off
		}
	}
	return limit
}

// fetchCovering returns a fetch on its way (or done, not yet adopted)
// covering [off, end).
func (f *file) fetchCovering(off, end int64) *prefetch {
	for _, n := range f.fetches {
		if off >= n.off && end <= n.end {
			return n
		}
	}
	return nil
}

// adopt takes the finished fetch n out of f.fetches (if it is still there:
// nothing changed the committed content meanwhile) and makes its buffer the
// read-ahead buffer. It returns n.err.
func (f *file) adopt(n *prefetch) error {
	i := slices.Index(f.fetches, n)
	if i < 0 {
		return n.err
	}
	f.fetches = slices.Delete(f.fetches, i, i+1)
	if n.err == nil {
		f.setReadAhead(n.buf, n.off)
	}
	return n.err
}

// waitUnlocked runs wait, with f.mu let go if unlock; errMoved if the
// committed content changed meanwhile.
func (f *file) waitUnlocked(unlock bool, wait func() error) error {
	if !unlock {
		return wait()
	}
	v := f.version
	f.mu.Unlock()
	err := wait()
	f.mu.Lock()
	if f.version != v {
		return errMoved
	}
	return err
}

// prefetch is a fetch of committed content on its way: a read-ahead in the
// background, or the fetch of a read that missed the buffers.
type prefetch struct {
	off, end int64
	buf      *sharedBuf // its first reference goes to the file with adopt
	err      error
	done     chan struct{}
}

// maxFetches bounds the fetches of one file on their way (or done and not
// yet read) at once, and aheadWindow how far past a sequential reader they
// reach: with a single fetch ahead, each 4 MiB took the volume server's
// disk read and both sides' copies one after the other while the reader
// waited; several on their way overlap them (and keep both cores busy).
const (
	maxFetches  = 4
	aheadWindow = maxFetches * readAhead
)

// prefetchAfter keeps fetches of readAhead bytes going past what is
// buffered or on its way, one after the other, up to aheadWindow bytes past
// a sequential reader now at end.
//
// The kernel's READs come a little out of order, so fetches are adopted
// out of order too, and the buffer adopted last may lie before another:
// the frontier is found past every buffer and fetch, never by the last
// buffer's end alone (that fetched bytes already buffered again, and the
// fetch, never read, then held one of the maxFetches places for good).
func (f *file) prefetchAfter(end, csize int64) {
	if f.resolved == nil {
		return
	}
	f.pruneFetches(end)
	at := end
	for at < csize && at-end < aheadWindow {
		if b, bOff := f.buffered(at, at+1); b != nil {
			at = bOff + int64(len(b.b))
			continue
		}
		if n := f.fetchCovering(at, at+1); n != nil {
			at = n.end
			continue
		}
		if len(f.fetches) >= maxFetches {
			return
		}
		n := &prefetch{off: at, end: f.nextFetch(at+1, min(at+readAhead, csize)), done: make(chan struct{})}
		n.buf = newSharedBuf(int(n.end - n.off))
		f.fetches = append(f.fetches, n)
		r := chunk.NewReader(context.Background(), f.fs.reader, f.resolved, csize)
		f.fs.workers.run(func() {
			defer close(n.done)
			m, err := r.ReadAt(n.buf.b, n.off)
			if err == io.EOF && m == len(n.buf.b) {
				err = nil
			}
			n.err = err
		})
		at = n.end
	}
}

// pruneFetches forgets the finished fetches that end more than readAhead
// before a sequential reader now at end: no READ comes back that far, and
// one left there would hold a place of maxFetches. Their buffers are left
// to the GC (a READ that waited for one may still hold it).
func (f *file) pruneFetches(end int64) {
	f.fetches = slices.DeleteFunc(f.fetches, func(n *prefetch) bool {
		if n.end > end-readAhead {
			return false
		}
		select {
		case <-n.done:
			return true
		default:
			return false
		}
	})
}

// prefetchSmall starts fetching a small file whole (at most readAhead
// bytes, one request) when it is opened for reading, so that the fetch
// overlaps the kernel's turn from OPEN to the first READ, which then waits
// for it (readCommitted) instead of starting it. Nothing is fetched for a
// file with buffered writes or read-ahead already.
//
// spec, if not nil, is a fetch of the file started from a cached entry
// before the open asked the filer (OpenForReading): it is used instead of
// a new fetch if the committed entry now has the same content, and dropped
// otherwise (left to finish and to the GC).
func (f *file) prefetchSmall(ctx context.Context, spec *specFetch) {
	f.mu.Lock()
	defer f.mu.Unlock()
	csize := f.entry.Size
	if csize <= 0 || csize > readAhead || f.dirty || len(f.blocks) > 0 || len(f.pending) > 0 ||
		len(f.ras) > 0 || len(f.fetches) > 0 || f.createErr != nil {
		return
	}
	if spec != nil && sameContent(spec.entry, f.entry) {
		f.fetches = append(f.fetches, spec.n)
		f.fs.specHits.Add(1)
		return
	}
	if spec != nil {
		f.fs.specMisses.Add(1)
	}
	if f.resolve(ctx) != nil {
		return // the read will say why
	}
	f.fetches = append(f.fetches, f.fs.fetchWhole(f.resolved, csize))
}

// fetchWhole starts reading the size bytes of content cs into a pooled
// buffer in the background (not under the caller's context: the fetch
// outlives the call that started it).
func (fs *FS) fetchWhole(cs []chunk.Chunk, size int64) *prefetch {
	n := &prefetch{off: 0, end: size, buf: newSharedBuf(int(size)), done: make(chan struct{})}
	r := chunk.NewReader(context.Background(), fs.reader, cs, size)
	fs.workers.run(func() {
		defer close(n.done)
		n.err = readFull(r, n.buf.b, 0)
	})
	return n
}

// resolve expands the committed entry's manifests, once per version.
func (f *file) resolve(ctx context.Context) error {
	if f.resolved != nil {
		return nil
	}
	cs, err := chunk.Resolve(ctx, f.fs.reader, chunksOf(f.entry), 0, -1)
	if err != nil {
		return err
	}
	f.resolved = cs
	if f.resolved == nil {
		f.resolved = []chunk.Chunk{}
	}
	return nil
}

func readFull(r io.ReaderAt, buf []byte, off int64) error {
	n, err := r.ReadAt(buf, off)
	if err == io.EOF && n == len(buf) {
		err = nil
	}
	return err
}

func chunksOf(e *filerpb.Entry) []chunk.Chunk {
	cs := make([]chunk.Chunk, 0, len(e.Chunks))
	for _, c := range e.Chunks {
		cs = append(cs, chunk.Chunk{FID: c.Fid, Offset: c.Offset, Size: c.Size, Mtime: c.MtimeNs, ETag: c.Etag, Manifest: c.Manifest, CipherKey: chunk.KeyOf(c.CipherKey)})
	}
	return cs
}

// flush uploads everything buffered and commits it with the size and
// mtime in one entry update; the data is then on the volume servers (which
// answer only once it is synced) and the entry in the filer's store.
func (f *file) flush(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.lateErr; err != nil {
		f.lateErr = nil
		return err
	}
	return f.commitLocked(ctx)
}

// commitQuiet commits what is buffered, as flush does, but leaves a
// failure (and an earlier background commit's) for the file's next flush.
func (f *file) commitQuiet(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.commitLocked(ctx); err != nil && f.lateErr == nil && f.createErr == nil {
		f.lateErr = err
	}
}

// startFlush starts the upload of every dirty block without waiting.
func (f *file) startFlush(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.createFailure(); err != nil {
		return err
	}
	return f.uploadBlocks(ctx, true)
}

// waitCreated waits for the create of the file's entry, if it is on its
// way (not if it is held for the first commit, which sends it), and
// returns createFailure.
func (f *file) waitCreated() error {
	if c := f.created; c != nil && f.createErr == nil && !c.held() {
		<-c.done
	}
	return f.createFailure()
}

// store commits e: with the file's create, if that is still held for
// the first commit (createAsync), else as an update once the create is
// done.
func (f *file) store(ctx context.Context, e *filerpb.Entry) error {
	if c := f.created; c.claim() {
		err := f.fs.sendCreateEntry(ctx, e, f.fs.deferring(ctx))
		f.fs.finishCreate(c, err)
		if err != nil {
			return f.createFailure()
		}
		return nil
	}
	if err := f.waitCreated(); err != nil {
		return err
	}
	return f.fs.update(ctx, e)
}

// createFailure returns the filer's refusal of the file's create answered
// early (Config.AsyncCreate), if the create is done and was refused: ENOSPC
// for a quota (as write(2) and close(2) report a full disk), EIO for the
// rest (another client made the name meanwhile, the directory went, the
// filer failed; the log says which), the errno of lost data. The buffered
// data is dropped then: there is no entry to commit it to. It does not
// wait: a write or a close tells the refusal if it has come, a commit
// waits for it (waitCreated).
func (f *file) createFailure() error {
	if f.createErr != nil {
		return f.createErr
	}
	c := f.created
	if !c.refused() {
		return nil
	}
	en := Errno(c.err)
	if en != syscall.ENOSPC && en != syscall.EDQUOT {
		en = syscall.EIO
	}
	f.createErr = errnof(en, "%s: the create answered early was refused: %v", f.path, c.err)
	clear(f.blocks)
	f.pending = nil
	f.err = nil
	f.dirty = false
	f.size = f.entry.Size
	f.dropReadAhead()
	f.forgotten = true
	return f.createErr
}

func (f *file) commitLocked(ctx context.Context) error {
	if err := f.waitCreated(); err != nil {
		return err
	}
	if err := f.uploadBlocks(ctx, false); err != nil {
		return err
	}
	if !f.dirty && len(f.pending) == 0 && !f.created.held() {
		return nil // nothing to store; a create held for this commit is sent with it
	}
	e := cloneEntry(f.entry)
	for _, u := range f.pending {
		<-u.done
		if u.err != nil && f.err == nil {
			f.err = u.err
		}
	}
	if err := f.err; err != nil {
		// The buffered data is lost: say so once, to this flush.
		f.err = nil
		f.pending = nil
		f.dirty = false
		f.size = f.entry.Size
		return errnof(syscall.EIO, "upload: %v", err)
	}
	for _, u := range f.pending {
		e.Chunks = append(e.Chunks, &filerpb.Chunk{Fid: u.fid, Offset: u.off, Size: int64(len(u.data)), MtimeNs: u.at, CipherKey: u.key})
	}
	e.Size = f.size
	e.MtimeNs = f.mtime.UnixNano()
	e.Md5 = nil
	e.Etag = ""
	if err := f.store(ctx, e); err != nil {
		return err
	}
	f.setCommitted(e)
	return nil
}

// setCommitted makes e the committed state, with nothing buffered.
func (f *file) setCommitted(e *filerpb.Entry) {
	f.entry = e
	f.version++
	for _, u := range f.pending {
		u.recycle()
	}
	f.pending = nil
	f.dirty = false
	f.size = e.Size
	f.resolved = nil
	f.dropReadAhead()
}

// uploadBlocks starts the upload of every dirty block: its dirty span as
// one chunk, with the bytes between dirty ranges read from what is there.
// unhurried: see startUpload.
func (f *file) uploadBlocks(ctx context.Context, unhurried bool) error {
	idxs := make([]int64, 0, len(f.blocks))
	for i := range f.blocks {
		idxs = append(idxs, i)
	}
	slices.Sort(idxs)
	for _, i := range idxs {
		b := f.blocks[i]
		lo, hi := b.dirty[0].lo, b.dirty[len(b.dirty)-1].hi
		var data []byte
		switch {
		case len(b.dirty) > 1:
			data = getBuf(int(hi - lo))
			if err := f.readCommitted(ctx, data, b.start+lo, false); err != nil {
				putBuf(data)
				return err
			}
			f.overlay(data, b.start+lo)
			putBuf(b.data)
		case lo == 0 && int(hi) > cap(b.data)/2:
			data = b.data[:hi]
		default:
			// Much less than the block's buffer (a small file written in
			// large pieces has a whole block): upload a copy of its size,
			// so that a closed file waiting for its commit holds no more
			// memory than its data.
			data = getBuf(int(hi - lo))
			copy(data, b.data[lo:hi])
			putBuf(b.data)
		}
		delete(f.blocks, i)
		f.startUpload(b.start+lo, data, unhurried)
	}
	return nil
}

// modify commits the buffer and applies fn to the entry in the same
// update; it returns the entry as changed.
//
// With lazy (attribute changes: chmod, chown, utimens) the change is not
// sent on its own but joins the file's next commit, as the data written
// does: this view shows it at once, the filer (and other mounts) at close,
// and fsync makes it durable with the data. tar sets the times, owner and
// mode of each file while it is still open: three round trips, and a wait
// for the upload of the data, saved per file.
func (f *file) modify(ctx context.Context, fn func(e *filerpb.Entry) error, lazy bool) (*filerpb.Entry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.forgotten || f.created.refused() {
		return nil, errForgotten
	}
	if f.queued || (lazy && !f.unlinked) {
		// Closed, its commit to come: the change joins it (tar sets the
		// mode and times of each file it wrote after closing it).
		e := cloneEntry(f.entry)
		if err := fn(e); err != nil {
			return nil, err
		}
		if e.MtimeNs != f.entry.MtimeNs {
			f.mtime = timeOf(e.MtimeNs)
		}
		e.CtimeNs = time.Now().UnixNano()
		f.entry = e
		f.dirty = true
		return cloneEntry(e), nil
	}
	if err := f.commitLocked(ctx); err != nil {
		return nil, err
	}
	e := cloneEntry(f.entry)
	if err := fn(e); err != nil {
		return nil, err
	}
	sent := time.Now() // the filer's ctime is at or after it (updateContentAs)
	if err := f.store(ctx, e); err != nil {
		return nil, err
	}
	e.CtimeNs = sent.UnixNano()
	f.entry = e
	return cloneEntry(e), nil
}

// truncate sets the size as truncate(2) does: bytes past a shrunk end
// never come back, a grown file reads zeros in the new range.
func (f *file) truncate(ctx context.Context, size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if size < 0 {
		return syscall.EINVAL
	}
	if err := f.commitLocked(ctx); err != nil {
		return err
	}
	e := cloneEntry(f.entry)
	if size < e.Size {
		var keep []*filerpb.Chunk
		lo := size
		for _, c := range e.Chunks {
			switch {
			case c.Offset+c.Size <= size:
				keep = append(keep, c)
			case c.Offset < size: // cut in two: rewritten below
				lo = min(lo, c.Offset)
			}
		}
		if lo < size {
			data := make([]byte, size-lo)
			if err := f.readCommitted(ctx, data, lo, false); err != nil {
				return err
			}
			fid, key, err := chunk.PutChunk(ctx, f.fs.putter, data, f.fs.encrypt)
			if err != nil {
				return errnof(syscall.EIO, "truncate: %v", err)
			}
			keep = append(keep, &filerpb.Chunk{Fid: fid, Offset: lo, Size: int64(len(data)), MtimeNs: time.Now().UnixNano(), CipherKey: key})
		}
		e.Chunks = keep
	}
	e.Size = size
	e.MtimeNs = time.Now().UnixNano()
	e.Md5 = nil
	e.Etag = ""
	if err := f.store(ctx, e); err != nil {
		return err
	}
	f.setCommitted(e)
	f.mtime = time.Unix(0, e.MtimeNs)
	return nil
}
