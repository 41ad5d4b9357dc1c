package fsview

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/chunk"
)

// ReadShared answers with the bytes ReadAt gives, whatever the mix of
// sequential runs, jumps, short reads at the end and writes not yet
// committed lying over the range (differential against a model of the
// file and against ReadAt itself). Each answer is kept, unreleased, while
// later reads move the file on to other read-ahead buffers, and checked
// again before it is released: a buffer still held is never reused.
func TestReadSharedMatchesReadAtAndOutlivesTheFilesBuffers(t *testing.T) {
	s := startFiler(t)
	fs := newViewChunks(t, s, 1<<20)
	const piece = 1 << 20
	model := make([]byte, 21*piece+12345)
	rng := rand.New(rand.NewSource(11))
	rng.Read(model)
	writeFile(t, fs, "/f", model)
	ctx := context.Background()
	h, err := fs.Open(ctx, "/f", os.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	type held struct {
		data    []byte
		want    []byte
		off     int64
		release func()
	}
	var kept []held
	checkKept := func(step int) {
		t.Helper()
		for _, k := range kept {
			if !bytes.Equal(k.data, k.want) {
				t.Fatalf("step %d: a shared answer at %d changed while held", step, k.off)
			}
		}
	}
	off := int64(0)
	for step := 0; step < 400; step++ {
		switch r := rng.Intn(20); {
		case r == 0: // a jump elsewhere
			off = rng.Int63n(int64(len(model)))
		case r == 1: // a write lying over what is read next (not committed)
			w := make([]byte, 1+rng.Intn(3000))
			rng.Read(w)
			at := min(off+rng.Int63n(2*piece), int64(len(model)-len(w)))
			if _, err := h.WriteAt(ctx, w, at); err != nil {
				t.Fatal(err)
			}
			copy(model[at:], w)
		case r == 2: // committed: what follows is read-ahead of committed content again
			if err := h.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		n := piece
		if rng.Intn(4) == 0 {
			n = 1 + rng.Intn(piece)
		}
		p := make([]byte, n)
		data, release, err := h.ReadShared(ctx, p, off)
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		end := min(off+int64(n), int64(len(model)))
		want := model[min(off, end):end]
		if !bytes.Equal(data, want) {
			t.Fatalf("step %d: ReadShared of %d at %d: wrong bytes (%d, want %d)", step, n, off, len(data), len(want))
		}
		q := make([]byte, n)
		m, err := h.ReadAt(ctx, q, off)
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if !bytes.Equal(q[:m], data) {
			t.Fatalf("step %d: ReadAt and ReadShared of %d at %d differ", step, n, off)
		}
		kept = append(kept, held{data: data, want: bytes.Clone(want), off: off, release: release})
		if len(kept) > 12 {
			checkKept(step)
			kept[0].release()
			kept = kept[1:]
		}
		off = end
		if off >= int64(len(model)) {
			off = 0
		}
	}
	checkKept(-1)
	for _, k := range kept {
		k.release()
	}
}

// Concurrent READs of a sequential reader, each holding its answer from
// the read-ahead buffers until all of a batch are in (as the FUSE library
// holds a reply until it is written), get the file's bytes.
func TestConcurrentSharedReads(t *testing.T) {
	s := startFiler(t)
	fs := newViewChunks(t, s, 1<<20)
	const piece = 1 << 20
	data := make([]byte, 40*piece)
	rand.New(rand.NewSource(5)).Read(data)
	writeFile(t, fs, "/big", data)
	ctx := context.Background()
	h, err := fs.Open(ctx, "/big", os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	type answer struct {
		k       int
		data    []byte
		release func()
		err     error
	}
	for k := 0; k < len(data)/piece; k += 8 {
		out := make(chan answer, 8)
		for j := k; j < k+8; j++ {
			go func() {
				d, rel, err := h.ReadShared(ctx, make([]byte, piece), int64(j*piece))
				out <- answer{j, d, rel, err}
			}()
		}
		var got []answer
		for range 8 {
			a := <-out
			if a.err != nil {
				t.Fatal(a.err)
			}
			got = append(got, a)
		}
		for _, a := range got {
			if !bytes.Equal(a.data, data[a.k*piece:(a.k+1)*piece]) {
				t.Fatal(fmt.Sprintf("READ of piece %d: wrong bytes", a.k))
			}
			a.release()
		}
	}
}

// slowOpener answers each chunk read after a random delay, so that the
// fetches of a sequential reader finish, and are adopted, out of order.
type slowOpener struct {
	inner chunk.Opener
	mu    sync.Mutex
	rng   *rand.Rand
}

func (o *slowOpener) Open(ctx context.Context, fid string, off, n int64) (io.ReadCloser, error) {
	o.mu.Lock()
	d := time.Duration(o.rng.Intn(8000)) * time.Microsecond
	o.mu.Unlock()
	time.Sleep(d) // a volume server's latency, not a wait for a condition
	return o.inner.Open(ctx, fid, off, n)
}

// A sequential reader whose READs come in shuffled batches (the kernel's
// read-ahead) while the fetches finish out of order still finds its bytes
// buffered or on their way after the first few READs: the read-ahead
// never fetches what is buffered already, and no fetch left behind the
// reader holds a place that the fetches ahead need.
func TestSequentialReadStaysAheadWithFetchesOutOfOrder(t *testing.T) {
	s := startFiler(t)
	fs := newViewChunks(t, s, 1<<20)
	const piece = 1 << 20
	data := make([]byte, 96*piece)
	rand.New(rand.NewSource(8)).Read(data)
	writeFile(t, fs, "/big", data)
	counter := &byteCountingOpener{inner: &slowOpener{inner: fs.reader, rng: rand.New(rand.NewSource(9))}}
	fs.reader = counter
	ctx := context.Background()
	h, err := fs.Open(ctx, "/big", os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	before := fs.Stats().ReadMisses
	rng := rand.New(rand.NewSource(10))
	for k := 0; k < len(data)/piece; k += 6 {
		batch := []int{k, k + 1, k + 2, k + 3, k + 4, k + 5}
		rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
		errs := make(chan error, len(batch))
		for _, j := range batch {
			go func() {
				d, rel, err := h.ReadShared(ctx, make([]byte, piece), int64(j*piece))
				if err == nil && !bytes.Equal(d, data[j*piece:(j+1)*piece]) {
					err = fmt.Errorf("READ of piece %d: wrong bytes", j)
				}
				rel()
				errs <- err
			}()
		}
		for range batch {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
	m := fs.Stats().ReadMisses - before
	t.Logf("%d read misses, %.1f MiB fetched", m, float64(counter.bytes.Load())/(1<<20))
	if m > 12 {
		t.Errorf("%d of %d READs fetched for themselves, want at most 12 (the read-ahead fell behind)", m, len(data)/piece)
	}
	// Each READ waits for its batch's, so none comes behind the buffers
	// kept: every byte is fetched exactly once.
	if got := counter.bytes.Load(); got != int64(len(data)) {
		t.Errorf("reading %d MiB fetched %.1f MiB, want each byte once", len(data)>>20, float64(got)/(1<<20))
	}
}
