package fsview

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand"
	"os"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/testutil"
)

// readHandle reads h whole, through ReadShared as the FUSE mount does.
func readHandle(t *testing.T, h *Handle) []byte {
	t.Helper()
	ctx := context.Background()
	var out []byte
	buf := make([]byte, 1<<20)
	for off := int64(0); ; {
		data, release, err := h.ReadShared(ctx, buf, off)
		out = append(out, data...)
		release()
		off += int64(len(data))
		if errors.Is(err, io.EOF) || (err == nil && len(data) == 0) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func randomBytes(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// A fetch started from an entry the view had cached, before the open
// asked the filer, is dropped when the filer's entry has other chunks (the
// file was rewritten elsewhere, its event not yet seen here): the open
// reads the new bytes, never the ones fetched early, even of the same size.
func TestSpeculativeFetchOfAChangedFileIsDropped(t *testing.T) {
	s := startFiler(t)
	fs := newView(t, s)
	ctx := context.Background()
	old, newer := randomBytes(1, 300_000), randomBytes(2, 300_000)
	writeFile(t, fs, "/f", old)
	stale, err := fs.lookupFresh(ctx, fs.full("/f"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, newView(t, s), "/f", newer) // another mount's write, closed before the open below
	spec := fs.speculate(stale)
	if spec == nil {
		t.Fatal("a small file was not fetched speculatively")
	}
	<-spec.n.done // the old bytes (or a failure: the old chunks may be gone)
	h, err := fs.Open(ctx, "/f", os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	h.f.prefetchSmall(ctx, spec)
	if got := readHandle(t, h); !bytes.Equal(got, newer) {
		t.Fatalf("read %d bytes after another mount's rewrite: not the new content (old: %v)", len(got), bytes.Equal(got, old))
	}
	if hits, misses := fs.specHits.Load(), fs.specMisses.Load(); hits != 0 || misses != 1 {
		t.Fatalf("speculative fetches kept %d, dropped %d; want 0 and 1", hits, misses)
	}
}

// A file opened for reading whose cached entry is still the filer's is read
// from the fetch started with the open: nothing is fetched twice.
func TestOpenForReadingKeepsTheFetchOfAnUnchangedFile(t *testing.T) {
	s := startFiler(t)
	fs := newView(t, s)
	ctx := context.Background()
	data := randomBytes(3, 1<<20)
	writeFile(t, fs, "/f", data)
	waitCached(t, fs, "/f")
	counter := &byteCountingOpener{inner: fs.reader}
	fs.reader = counter
	h, err := fs.OpenForReading(ctx, "/f", os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	if got := readHandle(t, h); !bytes.Equal(got, data) {
		t.Fatal("the file reads back differently")
	}
	if hits := fs.specHits.Load(); hits != 1 {
		t.Fatalf("%d speculative fetches kept, want 1", hits)
	}
	if n := counter.bytes.Load(); n != int64(len(data)) {
		t.Fatalf("fetched %d bytes for a file of %d", n, len(data))
	}
}

// Opening the files of a listed directory one after the other in name
// order fetches the next ones ahead; a file rewritten elsewhere after its
// fetch ahead began is read as the filer has it at its open.
func TestWalkFetchesAheadAndDropsWhatChanged(t *testing.T) {
	s := startFiler(t)
	fs := newView(t, s)
	ctx := context.Background()
	if _, err := fs.Mkdir(ctx, "/d", 0o755, 0, 0); err != nil {
		t.Fatal(err)
	}
	names := []string{"a", "b", "c", "e", "f"}
	want := map[string][]byte{}
	for i, n := range names {
		want[n] = randomBytes(int64(10+i), 100_000+i)
		writeFile(t, fs, "/d/"+n, want[n])
	}
	testutil.WaitFor(t, 5*time.Second, func() bool {
		if _, err := fs.ReadDir(ctx, "/d"); err != nil {
			t.Fatal(err)
		}
		if !ownSettled(fs) || fs.cache.listed(fs.full("/d")) == nil {
			return false
		}
		for _, n := range names {
			p := fs.full("/d/" + n)
			if _, cached := fs.cache.get(p); !cached || fs.openFile(p) != nil {
				return false // not cached yet, or its background commit still holds it open
			}
		}
		return true
	}, "the listing of /d was never kept whole with every file cached, committed and its event seen")
	open := func(n string) []byte {
		t.Helper()
		h, err := fs.OpenForReading(ctx, "/d/"+n, os.O_RDONLY)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Release(ctx)
		return readHandle(t, h)
	}
	for _, n := range []string{"a", "b"} {
		if got := open(n); !bytes.Equal(got, want[n]) {
			t.Fatalf("%s reads back differently", n)
		}
	}
	fs.walk.mu.Lock()
	_, aheadC := fs.walk.ahead[fs.full("/d/c")]
	_, aheadE := fs.walk.ahead[fs.full("/d/e")]
	fs.walk.mu.Unlock()
	if !aheadC || !aheadE {
		t.Fatalf("after opening a and b, c and e are not fetched ahead (c %v, e %v)", aheadC, aheadE)
	}
	// c is rewritten by another mount (same size, other bytes) after its
	// fetch ahead started, and closed before c is opened here.
	want["c"] = randomBytes(99, len(want["c"]))
	writeFile(t, newView(t, s), "/d/c", want["c"])
	hits, misses := fs.specHits.Load(), fs.specMisses.Load()
	if got := open("c"); !bytes.Equal(got, want["c"]) {
		t.Fatal("c, rewritten elsewhere before its open, reads back its old bytes")
	}
	if fs.specMisses.Load() != misses+1 {
		t.Fatal("the fetch ahead of the rewritten c was not dropped")
	}
	for _, n := range []string{"e", "f"} {
		if got := open(n); !bytes.Equal(got, want[n]) {
			t.Fatalf("%s reads back differently", n)
		}
	}
	if got := fs.specHits.Load() - hits; got != 2 {
		t.Fatalf("%d fetches ahead kept for e and f, want 2 (misses %d)", got, fs.specMisses.Load()-misses)
	}
}

// Opening files out of name order starts no walk: nothing is fetched
// ahead.
func TestNoWalkOutOfOrder(t *testing.T) {
	s := startFiler(t)
	fs := newView(t, s)
	ctx := context.Background()
	for _, n := range []string{"a", "b", "c"} {
		writeFile(t, fs, "/"+n, randomBytes(5, 10_000))
	}
	if _, err := fs.ReadDir(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"c", "b", "a"} {
		h, err := fs.OpenForReading(ctx, "/"+n, os.O_RDONLY)
		if err != nil {
			t.Fatal(err)
		}
		readHandle(t, h)
		h.Release(ctx)
	}
	fs.walk.mu.Lock()
	defer fs.walk.mu.Unlock()
	if len(fs.walk.ahead) != 0 {
		t.Fatalf("%d files fetched ahead of a reader going backwards", len(fs.walk.ahead))
	}
}
