package filer

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/filer/store"
)

func TestCleanPath(t *testing.T) {
	long := strings.Repeat("x", MaxNameLen+1)
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"/", "/", true},
		{"/a/b/", "/a/b", true},
		{"//a///b", "/a/b", true},
		{"/a/" + strings.Repeat("x", MaxNameLen), "/a/" + strings.Repeat("x", MaxNameLen), true},
		{"", "", false},
		{"a/b", "", false},
		{"/a/../b", "", false},
		{"/a/./b", "", false},
		{"/..", "", false},
		{"/a\x00b", "", false},
		{"/" + long, "", false},
		{"/" + strings.Repeat("a/", MaxPathLen/2+1), "", false},
	} {
		got, err := CleanPath(tc.in)
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("CleanPath(%q) = %q, %v", tc.in, got, err)
		}
		if !tc.ok && !errors.Is(err, ErrInvalidPath) {
			t.Errorf("CleanPath(%q): error %v is not ErrInvalidPath", tc.in, err)
		}
	}
}

func TestWriteReadSizes(t *testing.T) {
	const cs = 1024
	e := newEnv(t, Config{ChunkSize: cs})
	rnd := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{0, 1, cs - 1, cs, cs + 1, 5*cs + 3} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(rnd.Uint32())
		}
		p := fmt.Sprintf("/sizes/f%d", n)
		ent := e.write(t, p, data)
		sum := md5.Sum(data)
		if ent.Size != int64(n) || ent.ETag() != hex.EncodeToString(sum[:]) {
			t.Fatalf("%s: size %d etag %s", p, ent.Size, ent.ETag())
		}
		if want := (n + cs - 1) / cs; len(ent.Chunks) != want {
			t.Fatalf("%s: %d chunks, want %d", p, len(ent.Chunks), want)
		}
		if got := e.read(t, p); !bytes.Equal(got, data) {
			t.Fatalf("%s: content differs", p)
		}
	}
	e.checkNoLeak(t)
}

func TestCreateListPaginationPrefix(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	var names []string
	for i := 0; i < 25; i++ {
		names = append(names, fmt.Sprintf("f%02d", i))
	}
	names = append(names, "g0", "g1")
	for _, n := range names {
		e.write(t, "/d/"+n, []byte(n))
	}
	e.write(t, "/d/sub/deep", []byte("x"))
	e.write(t, "/dx", []byte("sibling with a longer name"))
	var got []string
	after := ""
	pages := 0
	for {
		page, more, err := e.f.ListEntries(ctx, "/d", ListOptions{StartAfter: after, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, ent := range page {
			got = append(got, ent.Name())
			after = ent.Name()
		}
		if !more {
			break
		}
	}
	want := append(append([]string(nil), names...), "sub")
	if strings.Join(got, ",") != strings.Join(want, ",") || pages != 3 {
		t.Fatalf("listed %v in %d pages", got, pages)
	}
	page, more, err := e.f.ListEntries(ctx, "/d", ListOptions{Prefix: "g", Limit: 10})
	if err != nil || more || len(page) != 2 || page[0].Name() != "g0" {
		t.Fatalf("prefix list: %v %v %v", page, more, err)
	}
	page, _, err = e.f.ListEntries(ctx, "/d", ListOptions{Prefix: "f1", StartAfter: "f12"})
	if err != nil || len(page) != 7 || page[0].Name() != "f13" {
		t.Fatalf("prefix+after list: %d entries, %v", len(page), err)
	}
	root, _, err := e.f.ListEntries(ctx, "/", ListOptions{})
	if err != nil || len(root) != 2 || root[0].Name() != "d" || !root[0].IsDir() || root[1].Name() != "dx" {
		t.Fatalf("root list: %v %v", root, err)
	}
	if _, _, err := e.f.ListEntries(ctx, "/dx", ListOptions{}); !errors.Is(err, ErrNotDir) {
		t.Fatalf("list of a file: %v", err)
	}
	if _, _, err := e.f.ListEntries(ctx, "/nope", ListOptions{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("list of a missing dir: %v", err)
	}
}

func TestEntryKinds(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	if err := e.f.Mkdir(ctx, "/a/b", 0o700, false); err != nil {
		t.Fatal(err)
	}
	if err := e.f.Mkdir(ctx, "/a/b", 0o700, true); !errors.Is(err, ErrExists) {
		t.Fatalf("exclusive mkdir: %v", err)
	}
	link := &Entry{Path: "/a/link", Mode: os.ModeSymlink | 0o777, Target: "/a/b", UID: 7, GID: 8,
		Meta: map[string]string{"k": "v"}, Xattrs: map[string][]byte{"user.x": {0, 1}}}
	if err := e.f.CreateEntry(ctx, link, CreateOptions{Exclusive: true}); err != nil {
		t.Fatal(err)
	}
	got, err := e.f.FindEntry(ctx, "/a/link")
	if err != nil {
		t.Fatal(err)
	}
	if got.Mode != link.Mode || got.Target != "/a/b" || got.UID != 7 || got.GID != 8 || got.Meta["k"] != "v" ||
		!bytes.Equal(got.Xattrs["user.x"], []byte{0, 1}) || got.Crtime.IsZero() || got.Mtime.IsZero() {
		t.Fatalf("symlink round trip: %+v", got)
	}
	e.write(t, "/a/file", []byte("x"))
	if _, err := e.f.WriteFile(ctx, "/a/b", strings.NewReader("x"), WriteOptions{}); !errors.Is(err, ErrIsDir) {
		t.Fatalf("write over dir: %v", err)
	}
	if _, err := e.f.WriteFile(ctx, "/a/file/x", strings.NewReader("x"), WriteOptions{}); !errors.Is(err, ErrNotDir) {
		t.Fatalf("write below a file: %v", err)
	}
	if err := e.f.Mkdir(ctx, "/a/file", 0o755, false); !errors.Is(err, ErrExists) {
		t.Fatalf("mkdir over file: %v", err)
	}
	// chmod-like update keeps chunks and content.
	f, _ := e.f.FindEntry(ctx, "/a/file")
	f.Mode = 0o600
	f.Xattrs = map[string][]byte{"user.y": []byte("1")}
	if err := e.f.UpdateEntry(ctx, f); err != nil {
		t.Fatal(err)
	}
	if string(e.read(t, "/a/file")) != "x" {
		t.Fatal("content lost by update")
	}
	f.Mode = os.ModeDir
	if err := e.f.UpdateEntry(ctx, f); !errors.Is(err, ErrInvalid) {
		t.Fatalf("type change: %v", err)
	}
	e.checkNoLeak(t)
}

func TestDeleteRecursiveAndGC(t *testing.T) {
	e := newEnv(t, Config{ChunkSize: 16})
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		e.write(t, fmt.Sprintf("/t/d%d/f", i%3), bytes.Repeat([]byte{byte(i)}, 40))
	}
	e.write(t, "/t2/keep", []byte("keep me, not a child of /t"))
	if err := e.f.DeleteEntry(ctx, "/t", false); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("non-recursive delete: %v", err)
	}
	if err := e.f.DeleteEntry(ctx, "/t", true); err != nil {
		t.Fatal(err)
	}
	if _, err := e.f.FindEntry(ctx, "/t/d1/f"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("child survived: %v", err)
	}
	if string(e.read(t, "/t2/keep")) != "keep me, not a child of /t" {
		t.Fatal("sibling damaged")
	}
	if err := e.f.DeleteEntry(ctx, "/", true); !errors.Is(err, ErrInvalid) {
		t.Fatalf("delete root: %v", err)
	}
	e.checkNoLeak(t)
	if len(e.blobs.Live()) != 2 { // /t2/keep: 26 bytes in 16-byte chunks
		t.Fatalf("%d blobs alive, want 2", len(e.blobs.Live()))
	}
}

func TestRandomRangeOverwrites(t *testing.T) {
	e := newEnv(t, Config{ChunkSize: 100})
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(5, 6))
	var ref []byte
	for i := 0; i < 200; i++ {
		off := rnd.Int64N(int64(len(ref)) + 300)
		data := make([]byte, 1+rnd.IntN(350))
		for j := range data {
			data[j] = byte(rnd.Uint32())
		}
		var err error
		if i%7 == 3 {
			_, err = e.f.Append(ctx, "/r", bytes.NewReader(data), WriteOptions{})
			off = int64(len(ref))
		} else {
			_, err = e.f.WriteAt(ctx, "/r", off, bytes.NewReader(data), WriteOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
		if end := int(off) + len(data); end > len(ref) {
			ref = append(ref, make([]byte, end-len(ref))...)
		}
		copy(ref[off:], data)
		if i%20 == 0 || i == 199 {
			if got := e.read(t, "/r"); !bytes.Equal(got, ref) {
				t.Fatalf("op %d: content differs from the reference", i)
			}
		}
	}
	ent, _ := e.f.FindEntry(ctx, "/r")
	if ent.Size != int64(len(ref)) {
		t.Fatalf("size %d want %d", ent.Size, len(ref))
	}
	e.checkNoLeak(t)
}

func TestConcurrentAppends(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				if _, err := e.f.Append(ctx, "/log", strings.NewReader(fmt.Sprintf("[w%d-%02d]", w, i)), WriteOptions{}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	got := string(e.read(t, "/log"))
	if len(got) != 80*len("[w0-00]") {
		t.Fatalf("log has %d bytes", len(got))
	}
	for w := 0; w < 8; w++ {
		for i := 0; i < 10; i++ {
			if !strings.Contains(got, fmt.Sprintf("[w%d-%02d]", w, i)) {
				t.Fatalf("append w%d-%02d lost", w, i)
			}
		}
	}
}

func TestManifestsKeepEntriesSmall(t *testing.T) {
	testManifests(t, Config{ChunkSize: 10, ManifestThreshold: 20, ManifestBatch: 8})
}

// TestEncryptedManifests: the same with EncryptData: every chunk and
// manifest is sealed under its own key, no blob holds the plaintext, the
// file reads back (also after a restart without the flag, and after a
// truncate), and the collector opens sealed manifests to delete their chunks.
func TestEncryptedManifests(t *testing.T) {
	e := testManifests(t, Config{ChunkSize: 10, ManifestThreshold: 20, ManifestBatch: 8, EncryptData: true})
	ctx := context.Background()
	data := bytes.Repeat([]byte("secret-plaintext!"), 100)
	ent := e.write(t, "/s", data)
	for _, c := range ent.Chunks {
		if len(c.CipherKey) != chunk.KeySize {
			t.Fatalf("chunk %s (manifest %v) has no key", c.FID, c.Manifest)
		}
	}
	for _, fid := range e.blobs.Live() {
		rc, _ := e.blobs.Open(ctx, fid, 0, -1)
		b, _ := io.ReadAll(rc)
		if bytes.Contains(b, []byte("secret-p")) || bytes.Contains(b, []byte("KCM1")) {
			t.Fatalf("blob %s holds plaintext", fid)
		}
	}
	e.restart(t, Config{ChunkSize: 10, ManifestThreshold: 20, ManifestBatch: 8})
	if !bytes.Equal(e.read(t, "/s"), data) {
		t.Fatal("content differs after a restart without EncryptData")
	}
	if _, err := e.f.Truncate(ctx, "/s", 555); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(e.read(t, "/s"), data[:555]) {
		t.Fatal("content differs after truncate")
	}
	if err := e.f.DeleteEntry(ctx, "/s", false); err != nil {
		t.Fatal(err)
	}
	e.checkNoLeak(t)
	if n := len(e.blobs.Live()); n != 0 {
		t.Fatalf("%d blobs left", n)
	}
}

func testManifests(t *testing.T, cfg Config) *env {
	e := newEnv(t, cfg)
	ctx := context.Background()
	data := make([]byte, 10*100+5)
	for i := range data {
		data[i] = byte(i * 7)
	}
	ent := e.write(t, "/big", data)
	if len(ent.Chunks) > 20 || len(manifestsOf(ent.Chunks)) == 0 {
		t.Fatalf("entry holds %d chunks, %d manifests", len(ent.Chunks), len(manifestsOf(ent.Chunks)))
	}
	if !bytes.Equal(e.read(t, "/big"), data) {
		t.Fatal("content differs")
	}
	// Appends past the threshold get packed too.
	for i := 0; i < 30; i++ {
		if _, err := e.f.Append(ctx, "/big", bytes.NewReader(data[:10]), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		data = append(data, data[:10]...)
	}
	ent, _ = e.f.FindEntry(ctx, "/big")
	if plainChunks(ent.Chunks) > 20 {
		t.Fatalf("%d plain chunks after appends", plainChunks(ent.Chunks))
	}
	if !bytes.Equal(e.read(t, "/big"), data) {
		t.Fatal("content differs after appends")
	}
	e.checkNoLeak(t)
	if err := e.f.DeleteEntry(ctx, "/big", false); err != nil {
		t.Fatal(err)
	}
	e.checkNoLeak(t)
	if n := len(e.blobs.Live()); n != 0 {
		t.Fatalf("%d blobs left after deleting the manifest file", n)
	}
	return e
}

func TestGCQueueSurvivesRestart(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	e.write(t, "/a", []byte("one"))
	down := errors.New("volume server down")
	// The filers' collectors run concurrently with the test: the fault is
	// switched off through an atomic, not by writing FailDelete again.
	var failing atomic.Bool
	failing.Store(true)
	e.blobs.FailDelete = func(string) error {
		if failing.Load() {
			return down
		}
		return nil
	}
	e.write(t, "/a", []byte("two")) // the first blob becomes garbage
	if _, err := e.f.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := e.f.PendingGarbage(ctx); n != 1 || len(e.blobs.Live()) != 2 {
		t.Fatalf("pending %d, live %d", n, len(e.blobs.Live()))
	}
	failing.Store(false)
	e.restart(t, Config{})
	e.checkNoLeak(t)
	if len(e.blobs.Live()) != 1 {
		t.Fatalf("live %v", e.blobs.Live())
	}
}

func TestFailedWriteDiscardsChunks(t *testing.T) {
	e := newEnv(t, Config{ChunkSize: 4})
	boom := errors.New("boom")
	e.blobs.FailPut = func(n int64) error {
		if n == 3 {
			return boom
		}
		return nil
	}
	if _, err := e.f.WriteFile(context.Background(), "/x", strings.NewReader("0123456789abcdef"), WriteOptions{}); !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	e.checkNoLeak(t)
	if len(e.blobs.Live()) != 0 {
		t.Fatalf("live %v", e.blobs.Live())
	}
}

// snapshot lists every path below the root with its content's ETag, in one
// consistent read.
func snapshot(t *testing.T, st store.Store) map[string]string {
	out := map[string]string{}
	err := st.View(context.Background(), func(tx store.ReadTx) error {
		clear(out)
		return walkTree(tx, "/", func(k, v []byte) error {
			p, err := pathOfKey(k)
			if err != nil {
				return err
			}
			ent, err := decodeEntry(p, v)
			if err != nil {
				return err
			}
			out[p] = ent.ETag()
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRenameDirectoryAtomic(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	const n = 40
	for i := 0; i < n; i++ {
		e.write(t, fmt.Sprintf("/src/d%d/f%d", i%4, i), []byte{byte(i)})
	}
	e.write(t, "/src-sibling", []byte("s")) // shares the name prefix
	stop := make(chan struct{})
	var bad error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			snap := snapshot(t, e.st)
			inSrc, inDst := 0, 0
			for p := range snap {
				switch {
				case strings.HasPrefix(p, "/src/"):
					inSrc++
				case strings.HasPrefix(p, "/dst/"):
					inDst++
				}
			}
			total := n + 4 // files and the four subdirectories
			if !(inSrc == total && inDst == 0) && !(inSrc == 0 && inDst == total) {
				bad = fmt.Errorf("reader saw %d entries in /src and %d in /dst", inSrc, inDst)
				return
			}
		}
	}()
	for i := 0; i < 20; i++ {
		from, to := "/src", "/dst"
		if i%2 == 1 {
			from, to = to, from
		}
		if err := e.f.Rename(ctx, from, to); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if bad != nil {
		t.Fatal(bad)
	}
	if got := e.read(t, "/src/d3/f7"); !bytes.Equal(got, []byte{7}) {
		t.Fatalf("content after renames: %v", got)
	}
	if string(e.read(t, "/src-sibling")) != "s" {
		t.Fatal("sibling moved")
	}
	e.checkNoLeak(t)
}

func TestRenameRules(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	e.write(t, "/a/x", []byte("x"))
	e.write(t, "/b/y", []byte("y"))
	e.write(t, "/f", []byte("f"))
	e.write(t, "/g", []byte("g"))
	if err := e.f.Mkdir(ctx, "/empty", 0o755, false); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from, to string
		want     error
	}{
		{"/a", "/a/sub", ErrInvalid},
		{"/a", "/a/x/deeper", ErrInvalid},
		{"/", "/z", ErrInvalid},
		{"/a", "/b", ErrNotEmpty},
		{"/a", "/f", ErrNotDir},
		{"/f", "/a", ErrIsDir},
		{"/missing", "/z", ErrNotFound},
		{"/a/../b", "/z", ErrInvalidPath},
	} {
		if err := e.f.Rename(ctx, tc.from, tc.to); !errors.Is(err, tc.want) {
			t.Errorf("Rename(%s, %s) = %v, want %v", tc.from, tc.to, err, tc.want)
		}
	}
	if err := e.f.Rename(ctx, "/f", "/g"); err != nil { // file replaces file
		t.Fatal(err)
	}
	if string(e.read(t, "/g")) != "f" {
		t.Fatal("replace failed")
	}
	if err := e.f.Rename(ctx, "/a", "/empty"); err != nil { // dir replaces empty dir
		t.Fatal(err)
	}
	if err := e.f.Rename(ctx, "/empty/x", "/new/parent/x"); err != nil { // parents created
		t.Fatal(err)
	}
	if string(e.read(t, "/new/parent/x")) != "x" {
		t.Fatal("move into new parents failed")
	}
	e.checkNoLeak(t)
}

func TestEntryGolden(t *testing.T) {
	ent := &Entry{
		Path: "/g", Mode: 0o640, UID: 1000, GID: 100, Mime: "text/plain", Size: 12,
		Mtime: fromNano(1700000000000000001), Ctime: fromNano(1700000000000000002), Crtime: fromNano(1700000000000000003),
		MD5: []byte{1, 2, 3}, Meta: map[string]string{"a": "b"}, Xattrs: map[string][]byte{"user.k": []byte("v")},
	}
	ent.Chunks = append(ent.Chunks, chunkFixture()...)
	got := encodeEntry(ent)
	const golden = "testdata/entry_v1.bin"
	if os.Getenv("KELP_UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("entry encoding changed: bump entryVersion and keep reading v1\n got %x\nwant %x", got, want)
	}
	back, err := decodeEntry("/g", want)
	if err != nil || !bytes.Equal(encodeEntry(back), want) {
		t.Fatalf("decode golden: %v", err)
	}
}

func FuzzDecodeEntry(f *testing.F) {
	f.Add(encodeEntry(&Entry{Mode: 0o644, Size: 3, Chunks: chunkFixture()}))
	f.Add(encodeEvent(&Event{Type: EventRename, Old: &Entry{Path: "/a"}, New: &Entry{Path: "/b"}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if e, err := decodeEntry("/x", b); err == nil {
			if _, err := decodeEntry("/x", encodeEntry(e)); err != nil {
				t.Fatalf("re-decode: %v", err)
			}
		}
		_, _ = decodeEvent(1, b)
	})
}

// TestReplacedChunksOutliveOpenReads: a reader that opened a file just
// before it was overwritten reads the old bytes to the end, although the
// garbage collector runs in between; the old chunks go once GCDelay is over.
func TestReplacedChunksOutliveOpenReads(t *testing.T) {
	var skew atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	e := newEnv(t, Config{ChunkSize: 4, GCDelay: time.Minute, Now: now})
	ctx := context.Background()
	old := []byte("0123456789abcdef")
	e.write(t, "/f", old)
	ent, err := e.f.FindEntry(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.f.Open(ctx, ent)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	head := make([]byte, 4)
	if _, err := io.ReadFull(r, head); err != nil {
		t.Fatal(err)
	}
	e.write(t, "/f", []byte("the new content, longer"))
	if n, err := e.f.CollectGarbage(ctx); err != nil || n != 0 {
		t.Fatalf("collected %d (%v) inside the grace period", n, err)
	}
	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("old reader after the overwrite: %v", err)
	}
	if got := append(head, rest...); !bytes.Equal(got, old) {
		t.Fatalf("old reader got %q", got)
	}
	skew.Store(int64(time.Minute + time.Second))
	if n, err := e.f.CollectGarbage(ctx); err != nil || n != 4 {
		t.Fatalf("collected %d (%v) after the grace period, want the 4 old chunks", n, err)
	}
	e.checkNoLeak(t)
}

// TestFailedWriteChunksAreDueAtOnce: chunks of a write that never
// committed were given to no reader; they do not wait for GCDelay.
func TestFailedWriteChunksAreDueAtOnce(t *testing.T) {
	e := newEnv(t, Config{ChunkSize: 4, GCDelay: time.Hour})
	e.blobs.FailPut = func(n int64) error {
		if n == 3 {
			return errors.New("boom")
		}
		return nil
	}
	if _, err := e.f.WriteFile(context.Background(), "/x", strings.NewReader("0123456789abcdef"), WriteOptions{}); err == nil {
		t.Fatal("write succeeded")
	}
	e.checkNoLeak(t)
	if len(e.blobs.Live()) != 0 {
		t.Fatalf("live %v", e.blobs.Live())
	}
}

// TestLegacyGCRecordsAreDrained: records of the queue as filers before
// GCDelay wrote it ("g" + fid, flags and time in the value) are still
// collected.
func TestLegacyGCRecordsAreDrained(t *testing.T) {
	e := newEnv(t, Config{GCDelay: time.Hour})
	ctx := context.Background()
	fid, err := e.blobs.Put(ctx, []byte("left by an older filer"))
	if err != nil {
		t.Fatal(err)
	}
	rec := binary.BigEndian.AppendUint64([]byte{0}, uint64(time.Now().UnixNano()))
	if err := e.st.Update(ctx, func(tx store.Tx) error { return tx.Put(append([]byte{'g'}, fid...), rec) }); err != nil {
		t.Fatal(err)
	}
	e.checkNoLeak(t)
	if e.blobs.Has(fid) {
		t.Fatal("the legacy record's blob is still there")
	}
}
