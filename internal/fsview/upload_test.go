package fsview

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/testutil"
)

// gatedPutter holds every upload until open is called, counting those in
// flight.
type gatedPutter struct {
	inner chunk.Putter
	gate  chan struct{}
	once  sync.Once

	mu                  sync.Mutex
	inFlight, maxFlight int
}

func gateUploads(fs *FS) *gatedPutter {
	g := &gatedPutter{inner: fs.putter, gate: make(chan struct{})}
	fs.putter = g
	return g
}

func (g *gatedPutter) Put(ctx context.Context, data []byte) (string, error) {
	g.mu.Lock()
	g.inFlight++
	g.maxFlight = max(g.maxFlight, g.inFlight)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}()
	<-g.gate
	return g.inner.Put(ctx, data)
}

func (g *gatedPutter) open() { g.once.Do(func() { close(g.gate) }) }

// waitInFlight waits until n uploads are held at once.
func (g *gatedPutter) waitInFlight(t *testing.T, n int) {
	t.Helper()
	testutil.WaitFor(t, 10*time.Second, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.inFlight == n
	}, fmt.Sprintf("%d uploads in flight", n))
}

// Files closed one after the other (an untar, a copy) upload together: as
// many at once as there are background commits, not a handful. Each upload
// started by close may wait some milliseconds at its volume server for
// others to share its fsync, so with 8 at a time an untar ran at 680
// files/s.
func TestClosedSmallFilesUploadTogether(t *testing.T) {
	s := startFiler(t)
	fs := newView(t, s)
	g := gateUploads(fs)
	t.Cleanup(g.open)
	ctx := context.Background()
	rng := rand.New(rand.NewSource(7))
	want := map[string][]byte{}
	for i := range maxBackgroundCommits {
		p := fmt.Sprintf("/f%02d", i)
		want[p] = make([]byte, 4096)
		rng.Read(want[p])
		h, err := fs.Create(ctx, p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.WriteAt(ctx, want[p], 0); err != nil {
			t.Fatal(err)
		}
		if err := h.StartFlush(ctx); err != nil {
			t.Fatal(err)
		}
		h.ReleaseLater()
	}
	g.waitInFlight(t, maxBackgroundCommits)
	g.open()
	if err := fs.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	r := newView(t, s)
	for p, data := range want {
		if got := readFile(t, r, p); !bytes.Equal(got, data) {
			t.Fatalf("%s reads back %d bytes, differing from the %d written", p, len(got), len(data))
		}
	}
}

// Whole chunks upload maxUploadBytes' worth at a time: with chunks of 16
// MiB, 4 at once, the fifth waiting for one of them.
func TestWholeChunkUploadsAreBoundedByTheirBytes(t *testing.T) {
	const chunkSize = 16 << 20
	s := startFiler(t)
	fs := newViewChunks(t, s, chunkSize)
	g := gateUploads(fs)
	t.Cleanup(g.open)
	ctx := context.Background()
	model := make([]byte, 5*chunkSize)
	rand.New(rand.NewSource(8)).Read(model)
	h, err := fs.Create(ctx, "/big", os.O_RDWR|os.O_CREATE, 0o644, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(model); off += chunkSize {
		if _, err := h.WriteAt(ctx, model[off:off+chunkSize], int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	g.waitInFlight(t, maxUploadBytes/chunkSize)
	g.open()
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if g.maxFlight != maxUploadBytes/chunkSize {
		t.Fatalf("%d uploads of %d MiB were in flight at once, want %d", g.maxFlight, chunkSize>>20, maxUploadBytes/chunkSize)
	}
	if got := readFile(t, newView(t, s), "/big"); !bytes.Equal(got, model) {
		t.Fatalf("/big reads back %d bytes, differing from the %d written", len(got), len(model))
	}
}

// A file created (answered early) and closed at once is made in the filer
// by one CreateEntry carrying its data: a small-file copy costs one filer
// call per file, not a create and then an update. A create held past the
// file's first commit is sent alone when something needs the name in the
// filer (here a listing): it is there, empty, for another view.
func TestCreateIsSentWithTheFirstCommit(t *testing.T) {
	s := startFiler(t)
	ctx := context.Background()
	fs := newMountLikeView(t, s)
	fs.createHold = time.Hour // held until the commit claims it, however slow the machine
	if _, err := fs.Mkdir(ctx, "/d", 0o755, 0, 0); err != nil {
		t.Fatal(err)
	}
	const files = 40
	before := fs.Stats().FilerCalls
	for i := range files {
		p := fmt.Sprintf("/d/f%02d", i)
		h, err := fs.Create(ctx, p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.WriteAt(ctx, []byte(p), 0); err != nil {
			t.Fatal(err)
		}
		if err := h.StartFlush(ctx); err != nil {
			t.Fatal(err)
		}
		h.ReleaseLater()
	}
	if err := fs.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if calls := fs.Stats().FilerCalls - before; calls > files+1 { // and Sync's
		t.Fatalf("%d files written took %d filer calls, want one each and the Sync", files, calls)
	}
	r := newView(t, s)
	for i := range files {
		p := fmt.Sprintf("/d/f%02d", i)
		if got := string(readFile(t, r, p)); got != p {
			t.Fatalf("%s reads %q", p, got)
		}
	}

	h, err := fs.Create(ctx, "/d/open", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	if _, err := fs.ReadDir(ctx, "/d"); err != nil { // settles: the held create is sent
		t.Fatal(err)
	}
	if a, err := r.Lookup(ctx, "/d/open"); err != nil || a.Size != 0 {
		t.Fatalf("the file still open, seen from another view: %+v %v", a, err)
	}
}

// A file written past maxPending chunks before its create is sent (a dd
// faster than createHold) commits the uploaded chunks in the middle of the
// write: that first commit sends the held create with them.
func TestHeldCreateSentByACommitInTheMiddleOfAWrite(t *testing.T) {
	s := startFiler(t)
	ctx := context.Background()
	fs := newMountLikeView(t, s)
	fs.createHold = time.Hour
	if _, err := fs.Mkdir(ctx, "/d", 0o755, 0, 0); err != nil { // known empty: creates answer early
		t.Fatal(err)
	}
	h, err := fs.Create(ctx, "/d/big", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, (maxPending+2)*fs.ChunkSize())
	for i := range data {
		data[i] = byte(i / 4093)
	}
	for off := 0; off < len(data); off += fs.ChunkSize() {
		if _, err := h.WriteAt(ctx, data[off:off+fs.ChunkSize()], int64(off)); err != nil {
			t.Fatalf("write at %d: %v", off, err)
		}
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, newView(t, s), "/d/big"); !bytes.Equal(got, data) {
		t.Fatalf("/d/big reads back %d bytes, differing from the %d written", len(got), len(data))
	}
}
