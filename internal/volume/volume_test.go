package volume

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/testutil"
	"github.com/kelpfs/kelp/internal/ttl"
	"github.com/kelpfs/kelp/internal/vfs"
)

func TestWriteReadOverwriteDelete(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := testConfig(fsys)
	cfg.Replication = replication.Code{DiffRack: 1}
	v := create(t, cfg)
	ctx := context.Background()
	a := payload(1, 0, 1000)
	res := put(t, v, 1, 11, a)
	if res.ETag != etag(needle.CRC(a)) || res.Size != 1000 || res.Unchanged {
		t.Fatalf("write result %+v", res)
	}
	mustGet(t, v, 1, 11, a)
	_, err := get(v, 1, 12)
	mustErr(t, err, ErrCookieMismatch)
	_, err = get(v, 2, 11)
	mustErr(t, err, ErrNotFound)

	// Overwrite needs the stored cookie.
	b := payload(1, 1, 500)
	_, err = v.Write(ctx, needle.Meta{Key: 1, Cookie: 99}, bytes.NewReader(b), 500)
	mustErr(t, err, ErrCookieMismatch)
	put(t, v, 1, 11, b)
	mustGet(t, v, 1, 11, b)
	if again := put(t, v, 1, 11, b); !again.Unchanged {
		t.Fatal("identical rewrite was not detected as unchanged")
	}

	_, err = v.Delete(ctx, 1, 99)
	mustErr(t, err, ErrCookieMismatch)
	freed, err := v.Delete(ctx, 1, 11)
	if err != nil || freed != needle.RecordSize(uint32(32+2+500)) {
		t.Fatalf("delete = %d, %v", freed, err)
	}
	_, err = get(v, 1, 11)
	mustErr(t, err, ErrDeleted)
	_, err = v.Delete(ctx, 1, 11)
	mustErr(t, err, ErrDeleted)
	_, err = v.Delete(ctx, 5, 11)
	mustErr(t, err, ErrNotFound)
	put(t, v, 2, 22, payload(2, 0, 10))

	st := v.Stats()
	if st.FileCount != 1 || st.DeleteCount != 1 || st.DeletedBytes == 0 || st.GarbageRatio <= 0 || st.Replication != cfg.Replication {
		t.Fatalf("stats %+v", st)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	v = open(t, cfg)
	defer v.Close()
	if st2 := v.Stats(); st2.FileCount != st.FileCount || st2.DeletedBytes != st.DeletedBytes || st2.Size != st.Size || st2.Replication != cfg.Replication {
		t.Fatalf("stats after reopen %+v, before %+v", st2, st)
	}
	_, err = get(v, 1, 11)
	mustErr(t, err, ErrDeleted)
	mustGet(t, v, 2, 22, payload(2, 0, 10))
	names := strings.Join(fsys.Names(), " ")
	if !strings.Contains(names, "/data/pics_7.dat") || !strings.Contains(names, "/data/pics_7.idx") {
		t.Fatalf("files %s", names)
	}
}

func TestSmallReadIsOnePositionedRead(t *testing.T) {
	fsys := vfs.NewFaulty(vfs.NewMem())
	v := create(t, testConfig(fsys))
	defer v.Close()
	for k := uint64(1); k <= 50; k++ {
		put(t, v, k, 1, payload(k, 0, int(k)*1000))
	}
	fsys.ResetCounts()
	for k := uint64(1); k <= 50; k++ {
		mustGet(t, v, k, 1, payload(k, 0, int(k)*1000))
	}
	if n := fsys.Count(vfs.OpRead); n != 50 {
		t.Fatalf("50 small reads did %d ReadAt calls", n)
	}
}

func TestLargeNeedleStreamsAndVerifies(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := testConfig(fsys)
	v := create(t, cfg)
	defer v.Close()
	const size = 5<<20 + 123
	data := payload(9, 0, size)
	meta := needle.Meta{Key: 9, Cookie: 3, Name: "big.bin", Mime: "application/octet-stream", Pairs: bytes.Repeat([]byte("p"), 6000)}
	res, err := v.Write(context.Background(), meta, bytes.NewReader(data), size)
	if err != nil || res.ETag != etag(needle.CRC(data)) {
		t.Fatalf("write: %+v %v", res, err)
	}
	o, err := v.Read(9, 3)
	if err != nil {
		t.Fatal(err)
	}
	if o.Bytes() != nil || o.Size != size || o.Meta.Name != "big.bin" || len(o.Meta.Pairs) != 6000 {
		t.Fatalf("object %+v", o.Meta)
	}
	got, err := io.ReadAll(o)
	o.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %v", err)
	}
	// Ranged reads through ReadAt and Seek.
	o, _ = v.Read(9, 3)
	buf := make([]byte, 10)
	if _, err := o.ReadAt(buf, size-10); err != nil || !bytes.Equal(buf, data[size-10:]) {
		t.Fatalf("ReadAt tail: %v", err)
	}
	o.Seek(1<<20, io.SeekStart)
	if _, err := io.ReadFull(o, buf); err != nil || !bytes.Equal(buf, data[1<<20:1<<20+10]) {
		t.Fatalf("Seek+Read: %v", err)
	}
	o.Close()

	// Flip one data byte on disk: a sequential read ends in ErrCorrupt.
	f, _ := fsys.OpenFile("/data/pics_7.dat", 2, 0)
	f.WriteAt([]byte{^data[3<<20]}, needle.SuperblockSize+int64(needle.HeaderSize+meta.MetaLen())+3<<20)
	f.Close()
	o, err = v.Read(9, 3)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(o)
	o.Close()
	mustErr(t, err, needle.ErrCorrupt)
	// Also after seeking to the end and back, as http.ServeContent does to
	// learn the size; and the piece that reaches the end is withheld, so
	// that a reader counting bytes sees the read end short.
	o, _ = v.Read(9, 3)
	o.Seek(0, io.SeekEnd)
	o.Seek(0, io.SeekStart)
	got, err = io.ReadAll(o)
	o.Close()
	mustErr(t, err, needle.ErrCorrupt)
	if int64(len(got)) >= size {
		t.Fatalf("a corrupt needle's read gave all %d bytes", len(got))
	}
	// A reader that authenticates the bytes itself asks for no check: it
	// gets them all, the flipped one included, and its own check fails.
	o, _ = v.Read(9, 3)
	o.SkipChecksum()
	got, err = io.ReadAll(o)
	o.Close()
	if err != nil || int64(len(got)) != size || got[3<<20] == data[3<<20] {
		t.Fatalf("read without the check: %d bytes, %v", len(got), err)
	}
}

// genReader produces n bytes without holding them.
type genReader struct{ n, pos int64 }

func (g *genReader) Read(p []byte) (int, error) {
	if g.pos >= g.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), g.n-g.pos)]
	for i := range p {
		p[i] = byte(g.pos + int64(i))
	}
	g.pos += int64(len(p))
	return len(p), nil
}

func TestLargeWriteDoesNotBuffer(t *testing.T) {
	cfg := testConfig(vfs.OS())
	cfg.Dir = t.TempDir()
	v := create(t, cfg)
	defer v.Close()
	const size = 64 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := v.Write(context.Background(), needle.Meta{Key: 1}, &genReader{n: size}, size); err != nil {
		t.Fatal(err)
	}
	o, err := v.Read(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, o)
	o.Close()
	runtime.ReadMemStats(&after)
	if err != nil || n != size {
		t.Fatalf("read %d, %v", n, err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/8 {
		t.Fatalf("writing and reading %d bytes allocated %d", size, alloc)
	}
}

func TestShortBodyLeavesNoTrace(t *testing.T) {
	v := create(t, testConfig(vfs.NewMem()))
	defer v.Close()
	put(t, v, 1, 1, []byte("one"))
	size := v.Stats().Size
	for _, n := range []int64{100, 3 << 20} {
		_, err := v.Write(context.Background(), needle.Meta{Key: 2}, bytes.NewReader(make([]byte, n/2)), n)
		mustErr(t, err, ErrShortBody)
		if v.Stats().Size != size {
			t.Fatalf("failed write grew the volume")
		}
	}
	put(t, v, 3, 1, []byte("three"))
	mustGet(t, v, 1, 1, []byte("one"))
}

func TestFullAndReadOnly(t *testing.T) {
	cfg := testConfig(vfs.NewMem())
	cfg.SizeLimit = 4096
	changes := 0
	cfg.OnChange = func() { changes++ }
	v := create(t, cfg)
	defer v.Close()
	put(t, v, 1, 1, make([]byte, 2000))
	_, err := v.Write(context.Background(), needle.Meta{Key: 2}, bytes.NewReader(make([]byte, 3000)), 3000)
	mustErr(t, err, ErrFull)
	if !v.Stats().Full || changes != 1 {
		t.Fatalf("full=%v changes=%d", v.Stats().Full, changes)
	}
	_, err = v.Write(context.Background(), needle.Meta{Key: 2}, bytes.NewReader(make([]byte, 1<<20)), 5<<20)
	mustErr(t, err, ErrTooLarge)
	if _, err := v.Delete(context.Background(), 1, 1); err != nil {
		t.Fatalf("delete on a full volume: %v", err)
	}
	if err := v.SetReadOnly(true); err != nil {
		t.Fatal(err)
	}
	_, err = v.Write(context.Background(), needle.Meta{Key: 3}, bytes.NewReader(nil), 0)
	mustErr(t, err, ErrReadOnly)
	_, err = v.Delete(context.Background(), 1, 1)
	mustErr(t, err, ErrReadOnly)
	if !v.Stats().ReadOnly {
		t.Fatal("stats not read-only")
	}
	// The mark survives a restart.
	v.Close()
	v, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if !v.Stats().ReadOnly {
		t.Fatal("read-only mark lost on reopen")
	}
	if err := v.SetReadOnly(false); err != nil {
		t.Fatal(err)
	}
	put(t, v, 3, 1, nil)
}

func TestTTLExpiry(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	cfg := testConfig(vfs.NewMem())
	cfg.Now = func() time.Time { return now }
	cfg.TTL = ttl.TTL{Count: 1, Unit: 'd'}
	v := create(t, cfg)
	defer v.Close()
	put(t, v, 1, 1, []byte("volume ttl"))
	v.Write(context.Background(), needle.Meta{Key: 2, TTL: ttl.TTL{Count: 1, Unit: 'h'}}, strings.NewReader("hour"), 4)
	now = now.Add(2 * time.Hour)
	mustGet(t, v, 1, 1, []byte("volume ttl"))
	_, err := get(v, 2, 0)
	mustErr(t, err, ErrNotFound)
	now = now.Add(24 * time.Hour)
	_, err = get(v, 1, 1)
	mustErr(t, err, ErrNotFound)
	if err := v.Vacuum(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := v.Stats(); st.FileCount != 0 || st.Size != needle.SuperblockSize {
		t.Fatalf("vacuum kept expired needles: %+v", st)
	}
}

func TestFsyncFailureDisablesVolume(t *testing.T) {
	fsys := vfs.NewFaulty(vfs.NewMem())
	cfg := testConfig(fsys)
	cfg.Fsync = true
	changed := make(chan struct{}, 1)
	cfg.OnChange = func() { changed <- struct{}{} }
	v := create(t, cfg)
	defer v.Close()
	put(t, v, 1, 1, []byte("durable"))
	fsys.Inject(vfs.Fault{Op: vfs.OpSync, Path: ".dat"})
	_, err := v.Write(context.Background(), needle.Meta{Key: 2}, strings.NewReader("x"), 1)
	mustErr(t, err, ErrBroken)
	<-changed
	if !v.Stats().ReadOnly {
		t.Fatal("volume still writable after a failed fsync")
	}
	fsys.Clear()
	_, err = v.Write(context.Background(), needle.Meta{Key: 3}, strings.NewReader("x"), 1)
	mustErr(t, err, ErrBroken)
	mustGet(t, v, 1, 1, []byte("durable"))
}

func TestNoSpaceMidWrite(t *testing.T) {
	fsys := vfs.NewFaulty(vfs.NewMem())
	cfg := testConfig(fsys)
	cfg.Fsync = true
	v := create(t, cfg)
	for k := uint64(1); k <= 20; k++ {
		put(t, v, k, 1, payload(k, 0, 3000))
	}
	size := v.Stats().Size
	fsys.Inject(vfs.Fault{Op: vfs.OpWrite, Path: ".dat", Short: true, Times: 1})
	_, err := v.Write(context.Background(), needle.Meta{Key: 21}, bytes.NewReader(make([]byte, 3000)), 3000)
	mustErr(t, err, ErrNoSpace)
	// Streamed: fails on a later chunk.
	fsys.Inject(vfs.Fault{Op: vfs.OpWrite, Path: ".dat", Skip: 3})
	big := payload(22, 0, 2<<20)
	_, err = v.Write(context.Background(), needle.Meta{Key: 22}, bytes.NewReader(big), int64(len(big)))
	mustErr(t, err, ErrNoSpace)
	if v.Stats().Size != size {
		t.Fatalf("size %d after failed writes, want %d", v.Stats().Size, size)
	}
	fsys.Clear()
	put(t, v, 22, 1, big)
	for k := uint64(1); k <= 20; k++ {
		mustGet(t, v, k, 1, payload(k, 0, 3000))
	}
	v.Close()
	v = open(t, cfg)
	defer v.Close()
	mustGet(t, v, 22, 1, big)
	_, err = get(v, 21, 0)
	mustErr(t, err, ErrNotFound)
}

func TestCreateExistingFails(t *testing.T) {
	cfg := testConfig(vfs.NewMem())
	create(t, cfg).Close()
	if _, err := Create(cfg); err == nil {
		t.Fatal("Create over an existing volume succeeded")
	}
	cfg.ID = 8
	if _, err := Open(cfg); err == nil {
		t.Fatal("Open of a missing volume succeeded")
	}
	// A crash during Create can leave an empty .dat: Open refuses it, Create
	// may reuse it.
	f, _ := cfg.FS.OpenFile("/data/pics_8.dat", os.O_RDWR|os.O_CREATE, 0o644)
	f.Close()
	if _, err := Open(cfg); !errors.Is(err, needle.ErrCorrupt) {
		t.Fatalf("Open of an empty .dat: %v", err)
	}
	v := create(t, cfg)
	put(t, v, 1, 1, []byte("x"))
	v.Close()
}

func TestDestroy(t *testing.T) {
	fsys := vfs.NewMem()
	v := create(t, testConfig(fsys))
	put(t, v, 1, 1, []byte("x"))
	if err := v.Destroy(); err != nil {
		t.Fatal(err)
	}
	if names := fsys.Names(); len(names) != 0 {
		t.Fatalf("files left: %v", names)
	}
	if _, err := v.Read(1, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after destroy: %v", err)
	}
}

// TestGroupCommit checks that concurrent writers share fsyncs and that none
// is acknowledged before its sync.
func TestGroupCommit(t *testing.T) {
	fsys := vfs.NewFaulty(vfs.NewMem())
	cfg := testConfig(fsys)
	cfg.Fsync = true
	v := create(t, cfg)
	defer v.Close()
	fsys.Inject(vfs.Fault{Op: vfs.OpSync, Path: ".dat", Delay: 2 * time.Millisecond})
	fsys.ResetCounts()
	const writers, each = 16, 20
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		go func(w int) {
			for i := 0; i < each; i++ {
				k := uint64(w*each + i + 1)
				if _, err := v.Write(context.Background(), needle.Meta{Key: k}, bytes.NewReader(make([]byte, 1024)), 1024); err != nil {
					errs <- err
					return
				}
				v.syncer.mu.Lock()
				synced := v.syncer.synced
				v.syncer.mu.Unlock()
				if synced < 1 {
					errs <- errors.New("acknowledged before any sync")
					return
				}
			}
			errs <- nil
		}(w)
	}
	for w := 0; w < writers; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	syncs := fsys.Count(vfs.OpSync)
	if syncs == 0 || syncs > writers*each/4 {
		t.Fatalf("%d writes took %d fsyncs; want them shared", writers*each, syncs)
	}
	t.Logf("%d writes, %d fsyncs", writers*each, syncs)
}

// TestUnhurriedWritesShareASync: an unhurried write's sync waits for its
// timer, or for a hurried write, whose sync then covers it; either way the
// write is answered only once it is durable.
func TestUnhurriedWritesShareASync(t *testing.T) {
	fsys := vfs.NewFaulty(vfs.NewMem())
	cfg := testConfig(fsys)
	cfg.Fsync = true
	v := create(t, cfg)
	defer v.Close()
	unhurried := WithUnhurriedSync(context.Background())
	write := func(ctx context.Context, key uint64) chan error {
		done := make(chan error, 1)
		go func() {
			_, err := v.Write(ctx, needle.Meta{Key: key}, bytes.NewReader(make([]byte, 1024)), 1024)
			done <- err
		}()
		return done
	}
	synced := func() uint64 {
		v.syncer.mu.Lock()
		defer v.syncer.mu.Unlock()
		return v.syncer.synced
	}

	// Alone, it is synced when its timer fires.
	v.syncer.mu.Lock()
	v.syncer.unhurried = time.Millisecond
	v.syncer.mu.Unlock()
	fsys.ResetCounts()
	if err := <-write(unhurried, 1); err != nil {
		t.Fatal(err)
	}
	if n := fsys.Count(vfs.OpSync); n != 1 || synced() < 1 {
		t.Fatalf("a lone unhurried write: %d fsyncs, synced up to %d; want 1, its own", n, synced())
	}

	// Waiting, it starts no sync; a hurried write's sync covers them all.
	v.syncer.mu.Lock()
	v.syncer.unhurried = time.Hour
	v.syncer.mu.Unlock()
	fsys.ResetCounts()
	a, b := write(unhurried, 2), write(unhurried, 3)
	testutil.WaitFor(t, 10*time.Second, func() bool { return v.syncer.waiters() == 2 }, "the unhurried writes to wait")
	if n := fsys.Count(vfs.OpSync); n != 0 {
		t.Fatalf("unhurried writes started %d fsyncs before their timer", n)
	}
	if err := <-write(context.Background(), 4); err != nil {
		t.Fatal(err)
	}
	for _, done := range []chan error{a, b} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n := fsys.Count(vfs.OpSync); n != 1 {
		t.Fatalf("three writes took %d fsyncs, want the hurried one's only", n)
	}
}
