package fsview

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/testcluster"
	"github.com/kelpfs/kelp/internal/testutil"
)

// startFiler runs a cluster and a filer with small chunks, so that tests
// cross chunk boundaries with little data.
func startFiler(t *testing.T) *filerserver.Server {
	t.Helper()
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}}})
	s, err := filerserver.New(filerserver.Config{Masters: c.MasterAddrs(), Dir: t.TempDir(), ChunkSize: 64 << 10,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

func newView(t *testing.T, s *filerserver.Server) *FS { return newViewChunks(t, s, 0) }

// newViewChunks is newView with the view's chunk size (0: the default).
func newViewChunks(t *testing.T, s *filerserver.Server, chunkSize int) *FS {
	t.Helper()
	fs, err := New(context.Background(), Config{Filer: s.GRPCAddr(), ChunkSize: chunkSize, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	return fs
}

// newMountLikeView is a view set up as the FUSE mount sets it up: creates
// answered early (AsyncCreate), commits with deferred durability.
func newMountLikeView(t *testing.T, s *filerserver.Server) *FS {
	t.Helper()
	fs, err := New(context.Background(), Config{Filer: s.GRPCAddr(), Logger: slog.New(slog.DiscardHandler), DeferDurability: true, AsyncCreate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	waitLive(t, fs)
	return fs
}

// waitLive waits until fs follows the filer's metadata events: only then
// does it trust its cache, and answer a create of a name it knows absent
// before the filer has made it (Config.AsyncCreate).
func waitLive(t *testing.T, fs *FS) {
	t.Helper()
	testutil.WaitFor(t, 5*time.Second, func() bool {
		fs.cache.mu.Lock()
		defer fs.cache.mu.Unlock()
		return fs.cache.live
	}, "the metadata stream did not connect")
}

func wantErrno(t *testing.T, err error, want syscall.Errno) {
	t.Helper()
	if Errno(err) != want {
		t.Fatalf("got %v (errno %v), want %v", err, Errno(err), want)
	}
}

func writeFile(t *testing.T, fs *FS, p string, data []byte) {
	t.Helper()
	ctx := context.Background()
	h, err := fs.Create(ctx, p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, fs *FS, p string) []byte {
	t.Helper()
	ctx := context.Background()
	h, err := fs.Open(ctx, p, os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	var out []byte
	buf := make([]byte, 50_000) // not a multiple of anything
	for off := int64(0); ; {
		n, err := h.ReadAt(ctx, buf, off)
		out = append(out, buf[:n]...)
		off += int64(n)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestViewFilesAgainstAModel(t *testing.T) {
	s := startFiler(t)
	fs := newView(t, s)
	ctx := context.Background()
	rng := rand.New(rand.NewSource(1))
	model := make([]byte, 300<<10)
	rng.Read(model)
	writeFile(t, fs, "/f", model)
	if got := readFile(t, fs, "/f"); !bytes.Equal(got, model) {
		t.Fatalf("read back %d bytes, differ from the %d written", len(got), len(model))
	}
	// Random writes through two handles, some past the end, checked while
	// buffered and again after commit through a fresh view.
	h1, err := fs.Open(ctx, "/f", os.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := fs.Open(ctx, "/f", os.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		h := h1
		if i%2 == 1 {
			h = h2
		}
		off := rng.Int63n(int64(len(model)) + 20_000)
		b := make([]byte, 1+rng.Intn(9000))
		rng.Read(b)
		if _, err := h.WriteAt(ctx, b, off); err != nil {
			t.Fatal(err)
		}
		if end := off + int64(len(b)); end > int64(len(model)) {
			model = append(model, make([]byte, end-int64(len(model)))...)
		}
		copy(model[off:], b)
		if i == 100 {
			if err := h.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := make([]byte, len(model)+10)
	n, _ := h2.ReadAt(ctx, got, 0)
	if !bytes.Equal(got[:n], model) {
		t.Fatalf("buffered view differs from the model")
	}
	h1.Release(ctx)
	h2.Release(ctx)
	other := newView(t, s)
	if got := readFile(t, other, "/f"); !bytes.Equal(got, model) {
		t.Fatalf("committed content differs from the model (%d vs %d bytes)", len(got), len(model))
	}
	// Truncate down and up: the cut bytes read as zeros.
	if _, err := fs.Setattr(ctx, "/f", nil, SetAttr{Size: ptr(int64(70_000))}); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Setattr(ctx, "/f", nil, SetAttr{Size: ptr(int64(100_000))}); err != nil {
		t.Fatal(err)
	}
	want := append(append([]byte{}, model[:70_000]...), make([]byte, 30_000)...)
	if got := readFile(t, other, "/f"); !bytes.Equal(got, want) {
		t.Fatal("truncate down then up does not read zeros in the new range")
	}
}

func ptr[T any](v T) *T { return &v }

func TestViewSparseAppendAndExcl(t *testing.T) {
	fs := newView(t, startFiler(t))
	ctx := context.Background()
	h, err := fs.Create(ctx, "/sparse", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	h.WriteAt(ctx, []byte{7}, 1<<20)
	h.Release(ctx)
	got := readFile(t, fs, "/sparse")
	if len(got) != 1<<20+1 || got[1<<20] != 7 || bytes.Count(got, []byte{0}) != 1<<20 {
		t.Fatalf("sparse file: %d bytes", len(got))
	}
	_, err = fs.Create(ctx, "/sparse", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600, 0, 0)
	wantErrno(t, err, syscall.EEXIST)
	writeFile(t, fs, "/log", []byte("hello"))
	h, err = fs.Open(ctx, "/log", os.O_WRONLY|os.O_APPEND)
	if err != nil {
		t.Fatal(err)
	}
	h.WriteAt(ctx, []byte(" world"), 0)
	h.Release(ctx)
	if got := string(readFile(t, fs, "/log")); got != "hello world" {
		t.Fatalf("append: %q", got)
	}
	h, err = fs.Open(ctx, "/log", os.O_WRONLY|os.O_TRUNC)
	if err != nil {
		t.Fatal(err)
	}
	h.Release(ctx)
	if a, _ := fs.Lookup(ctx, "/log"); a.Size != 0 {
		t.Fatalf("O_TRUNC left %d bytes", a.Size)
	}
	_, err = fs.Lookup(ctx, "/"+strings.Repeat("x", 256))
	wantErrno(t, err, syscall.ENAMETOOLONG)
}

func TestViewNamespace(t *testing.T) {
	s := startFiler(t)
	fs := newView(t, s)
	ctx := context.Background()
	if _, err := fs.Mkdir(ctx, "/a", 0o755, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Mkdir(ctx, "/a/b", 0o755, 0, 0); err != nil {
		t.Fatal(err)
	}
	_, err := fs.Mkdir(ctx, "/x/y", 0o755, 0, 0)
	wantErrno(t, err, syscall.ENOENT)
	writeFile(t, fs, "/a/b/f", []byte("hel"))
	wantErrno(t, fs.Rmdir(ctx, "/a"), syscall.ENOTEMPTY)
	wantErrno(t, fs.Unlink(ctx, "/a"), syscall.EISDIR)
	if err := fs.Rename(ctx, "/a/b/f", "/a/g", false); err != nil {
		t.Fatal(err)
	}
	// Hard links: two names, one content, nlink counts them.
	if _, err := fs.Link(ctx, "/a/g", "/a/hard"); err != nil {
		t.Fatal(err)
	}
	a1, _ := fs.Lookup(ctx, "/a/g")
	a2, _ := fs.Lookup(ctx, "/a/hard")
	if a1.Nlink != 2 || a1.Ino != a2.Ino || a1.Size != 3 {
		t.Fatalf("after link: %+v / %+v", a1, a2)
	}
	writeFile(t, fs, "/a/hard", []byte("new"))
	if got := string(readFile(t, fs, "/a/g")); got != "new" {
		t.Fatalf("a write through one link shows %q through the other", got)
	}
	resp, err := http.Get("http://" + s.Addr() + "/a/g")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "new" {
		t.Fatalf("the filer's HTTP GET of a hard link answers %q", body)
	}
	if err := fs.Unlink(ctx, "/a/g"); err != nil {
		t.Fatal(err)
	}
	if a, _ := fs.Lookup(ctx, "/a/hard"); a.Nlink != 1 {
		t.Fatalf("nlink after unlink %d", a.Nlink)
	}
	if got := string(readFile(t, fs, "/a/hard")); got != "new" {
		t.Fatalf("remaining link reads %q", got)
	}
	// Symlinks, chmod, xattrs.
	if _, err := fs.Symlink(ctx, "hard", "/a/sym", 0, 0); err != nil {
		t.Fatal(err)
	}
	if tg, err := fs.Readlink(ctx, "/a/sym"); err != nil || tg != "hard" {
		t.Fatalf("readlink %q %v", tg, err)
	}
	if a, err := fs.Setattr(ctx, "/a/hard", nil, SetAttr{Mode: ptr(os.FileMode(0o640))}); err != nil || a.Mode.Perm() != 0o640 {
		t.Fatalf("chmod: %v %v", a.Mode, err)
	}
	if err := fs.SetXattr(ctx, "/a/hard", "user.k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if v, err := fs.GetXattr(ctx, "/a/hard", "user.k"); err != nil || string(v) != "v" {
		t.Fatalf("getxattr %q %v", v, err)
	}
	_, err = fs.GetXattr(ctx, "/a/hard", "user.none")
	wantErrno(t, err, syscall.ENODATA)
	wantErrno(t, fs.SetXattr(ctx, "/a/hard", "user.k", []byte("w"), XattrCreate), syscall.EEXIST)
	// Unlink of an open file: still readable and writable through the handle.
	writeFile(t, fs, "/a/open", []byte("still here"))
	h, err := fs.Open(ctx, "/a/open", os.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Unlink(ctx, "/a/open"); err != nil {
		t.Fatal(err)
	}
	_, err = fs.Lookup(ctx, "/a/open")
	wantErrno(t, err, syscall.ENOENT)
	h.WriteAt(ctx, []byte("STILL"), 0)
	buf := make([]byte, 20)
	n, _ := h.ReadAt(ctx, buf, 0)
	if string(buf[:n]) != "STILL here" {
		t.Fatalf("open unlinked file reads %q", buf[:n])
	}
	h.Release(ctx)
	ents, err := fs.ReadDir(ctx, "/")
	if err != nil || len(ents) != 1 || ents[0].Name != "a" {
		t.Fatalf("root lists %+v %v (the hidden directory must not show)", ents, err)
	}
	if err := fs.Rename(ctx, "/a/b", "/c", false); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, fs.Rename(ctx, "/c", "/a", false), syscall.ENOTEMPTY)
}

func TestUnreachableFilerFails(t *testing.T) {
	_, err := New(context.Background(), Config{Filer: "127.0.0.1:1", ConnectTimeout: 300e6, Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		t.Fatal("a view of an unreachable filer was made")
	}
}
