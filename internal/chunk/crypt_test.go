package chunk_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/chunk/chunktest"
)

// readLarge reads r to its end in reads of a buffer that holds several
// sealed segments, as the S3 gateway does (whole segments open in place).
func readLarge(r io.Reader) ([]byte, error) {
	var out []byte
	buf := make([]byte, 4*(chunk.SegmentSize+16)+5)
	for {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

var readers = map[string]func(io.Reader) ([]byte, error){"ReadAll": io.ReadAll, "large": readLarge}

func pseudo(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestSealRanges: a sealed blob opens whole and by any range, including
// ranges across segment boundaries and ending at the blob's short last
// segment, fetching only the segments the range touches.
func TestSealRanges(t *testing.T) {
	ctx := context.Background()
	for _, size := range []int{1, chunk.SegmentSize - 1, chunk.SegmentSize, chunk.SegmentSize + 1, 3*chunk.SegmentSize + 777, 9 * chunk.SegmentSize} {
		plain := pseudo(size, uint64(size))
		key, _ := chunk.NewKey()
		sealed, err := chunk.Seal(nil, key, plain)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(sealed)) != chunk.SealedSize(int64(size)) {
			t.Fatalf("size %d: sealed %d bytes, SealedSize says %d", size, len(sealed), chunk.SealedSize(int64(size)))
		}
		// A run of 16 plaintext bytes shows by chance in no blob; a shorter
		// one can (a single byte does in about 1 blob of 10).
		if size >= 16 && bytes.Contains(sealed, plain[:min(size, 64)]) {
			t.Fatalf("size %d: plaintext visible in the sealed blob", size)
		}
		if got, err := chunk.Unseal(key, sealed); err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("size %d: Unseal: %v", size, err)
		}
		b := chunktest.New()
		fid, _ := b.Put(ctx, sealed)
		cases := [][2]int64{{0, -1}, {0, int64(size)}, {int64(size) - 1, 1}, {0, 1}}
		if size > chunk.SegmentSize {
			s := int64(chunk.SegmentSize)
			cases = append(cases, [2]int64{s - 3, 10}, [2]int64{s, 1}, [2]int64{s - 1, int64(size) - s + 1}, [2]int64{5, -1})
		}
		for _, c := range cases {
			if c[1] > int64(size)-c[0] {
				c[1] = int64(size) - c[0]
			}
			for _, known := range []int64{int64(size), -1} {
				for name, read := range readers {
					rc, err := chunk.OpenChunk(ctx, b, fid, key, known, c[0], c[1])
					if err != nil {
						t.Fatal(err)
					}
					got, err := read(rc)
					rc.Close()
					end := int64(size)
					if c[1] >= 0 {
						end = c[0] + c[1]
					}
					if err != nil || !bytes.Equal(got, plain[c[0]:end]) {
						t.Fatalf("size %d range %v (size known %d, %s): %d bytes, err %v", size, c, known, name, len(got), err)
					}
				}
			}
		}
	}
}

// TestSealTamper: a changed byte, a wrong key or a cut blob fails to read
// with ErrDecrypt or an unexpected EOF, never with wrong bytes.
func TestSealTamper(t *testing.T) {
	for name, readAll := range readers {
		t.Run(name, func(t *testing.T) { testSealTamper(t, readAll) })
	}
}

func testSealTamper(t *testing.T, readAll func(io.Reader) ([]byte, error)) {
	ctx := context.Background()
	plain := pseudo(2*chunk.SegmentSize+100, 9)
	key, _ := chunk.NewKey()
	sealed, _ := chunk.Seal(nil, key, plain)
	read := func(blob, key []byte, size int64) error {
		b := chunktest.New()
		fid, _ := b.Put(ctx, blob)
		rc, err := chunk.OpenChunk(ctx, b, fid, key, size, 0, -1)
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = readAll(rc)
		return err
	}
	flipped := bytes.Clone(sealed)
	flipped[chunk.SegmentSize+20] ^= 1
	if err := read(flipped, key, int64(len(plain))); !errors.Is(err, chunk.ErrDecrypt) {
		t.Fatalf("flipped byte: %v", err)
	}
	other, _ := chunk.NewKey()
	if err := read(sealed, other, int64(len(plain))); !errors.Is(err, chunk.ErrDecrypt) {
		t.Fatalf("wrong key: %v", err)
	}
	cut := sealed[:chunk.SegmentSize+16] // one whole segment
	if err := read(cut, key, int64(len(plain))); err == nil {
		t.Fatal("a blob cut at a segment boundary read without error")
	}
}

// TestSplitEncrypted: Split with Encrypt stores only sealed blobs, each
// under its own key, keeps the plaintext MD5, and a Reader (and ReadAt)
// returns the plaintext; manifests of sealed chunks are sealed too.
func TestSplitEncrypted(t *testing.T) {
	ctx := context.Background()
	b := chunktest.New()
	data := pseudo(5*100_000+123, 3)
	res, err := chunk.Split(ctx, b, bytes.NewReader(data), 0, chunk.SplitOptions{ChunkSize: 100_000, Encrypt: true})
	if err != nil {
		t.Fatal(err)
	}
	if sum := md5.Sum(data); !bytes.Equal(res.MD5, sum[:]) {
		t.Fatal("MD5 is not the plaintext's")
	}
	keys := map[string]bool{}
	for _, c := range res.Chunks {
		if len(c.CipherKey) != chunk.KeySize || keys[string(c.CipherKey)] {
			t.Fatalf("chunk %s: key %x (reused or missing)", c.FID, c.CipherKey)
		}
		keys[string(c.CipherKey)] = true
	}
	packed, err := chunk.Pack(ctx, b, res.Chunks, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range packed {
		if c.Manifest && c.CipherKey == nil {
			t.Fatal("a manifest of sealed chunks is stored in the clear")
		}
	}
	for _, fid := range b.Live() {
		rc, _ := b.Open(ctx, fid, 0, -1)
		blob, _ := io.ReadAll(rc)
		if bytes.Contains(blob, data[1000:1064]) || bytes.Contains(blob, []byte(res.Chunks[0].FID)) {
			t.Fatalf("blob %s holds plaintext", fid)
		}
	}
	// The chunk list survives its encoding (entries, manifests).
	list, _, err := chunk.ReadList(chunk.AppendList(nil, packed))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := chunk.Resolve(ctx, b, list, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	r := chunk.NewReader(ctx, b, cs, int64(len(data)))
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %d bytes, %v", len(got), err)
	}
	for _, rg := range [][2]int{{99_990, 20}, {0, 1}, {len(data) - 5, 5}, {150_000, 250_001}} {
		p := make([]byte, rg[1])
		if n, err := r.ReadAt(p, int64(rg[0])); err != nil || n != rg[1] || !bytes.Equal(p, data[rg[0]:rg[0]+rg[1]]) {
			t.Fatalf("ReadAt %v: %d, %v", rg, n, err)
		}
		if _, err := r.Seek(int64(rg[0]), io.SeekStart); err != nil {
			t.Fatal(err)
		}
		q := make([]byte, rg[1])
		if _, err := io.ReadFull(r, q); err != nil || !bytes.Equal(q, p) {
			t.Fatalf("Seek+Read %v: %v", rg, err)
		}
	}
}

func BenchmarkSeal1MiB(b *testing.B) {
	data := pseudo(1<<20, 1)
	key, _ := chunk.NewKey()
	var dst []byte
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		var err error
		if dst, err = chunk.Seal(dst[:0], key, data); err != nil {
			b.Fatal(err)
		}
	}
	_ = fmt.Sprint(len(dst))
}

// openSpy records the ranges asked of the blob store.
type openSpy struct {
	chunk.Opener
	asked [][2]int64
}

func (s *openSpy) Open(ctx context.Context, fid string, off, n int64) (io.ReadCloser, error) {
	s.asked = append(s.asked, [2]int64{off, n})
	return s.Opener.Open(ctx, fid, off, n)
}

// A whole blob, sealed or not, is asked for without a range (n = -1), so
// that a volume server answers it from its plain-read path; a part of one
// still asks for just that part.
func TestWholeBlobWithoutRange(t *testing.T) {
	ctx := context.Background()
	const size = 2*chunk.SegmentSize + 5
	plain := pseudo(size, 7)
	key, _ := chunk.NewKey()
	sealed, _ := chunk.Seal(nil, key, plain)
	mem := chunktest.New()
	clearID, _ := mem.Put(ctx, plain)
	sealedID, _ := mem.Put(ctx, sealed)
	for _, c := range []struct {
		fid string
		key []byte
	}{{clearID, nil}, {sealedID, key}} {
		for _, r := range [][3]int64{{0, size, -1}, {0, size - 1, 0}, {1, size - 1, 0}} {
			spy := &openSpy{Opener: mem}
			rc, err := chunk.OpenChunk(ctx, spy, c.fid, c.key, size, r[0], r[1])
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(got, plain[r[0]:r[0]+r[1]]) {
				t.Fatalf("sealed %v, %d+%d: %d bytes, %v", c.key != nil, r[0], r[1], len(got), err)
			}
			whole := spy.asked[0][0] == 0 && spy.asked[0][1] == -1
			if whole != (r[2] == -1) {
				t.Errorf("sealed %v, %d+%d: asked the store for %v", c.key != nil, r[0], r[1], spy.asked)
			}
		}
	}
}

// ctxOpener records whether each Open was marked authenticated.
type ctxOpener struct {
	chunk.Opener
	marks []bool
}

func (o *ctxOpener) Open(ctx context.Context, fid string, off, n int64) (io.ReadCloser, error) {
	o.marks = append(o.marks, chunk.IsAuthenticated(ctx))
	return o.Opener.Open(ctx, fid, off, n)
}

// TestSealedReadsAreAuthenticated: the fetch of a sealed blob tells the
// store that its reader checks every byte (so the volume server may skip its
// CRC pass); the fetch of a blob in the clear does not.
func TestSealedReadsAreAuthenticated(t *testing.T) {
	ctx := context.Background()
	plain := pseudo(3*chunk.SegmentSize+7, 4)
	key, _ := chunk.NewKey()
	sealed, _ := chunk.Seal(nil, key, plain)
	b := chunktest.New()
	sealedID, _ := b.Put(ctx, sealed)
	clearID, _ := b.Put(ctx, plain)
	o := &ctxOpener{Opener: b}
	for _, c := range []struct {
		fid  string
		key  []byte
		want bool
	}{{sealedID, key, true}, {clearID, nil, false}} {
		o.marks = nil
		rc, err := chunk.OpenChunk(ctx, o, c.fid, c.key, int64(len(plain)), 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("read back: %v", err)
		}
		if len(o.marks) != 1 || o.marks[0] != c.want {
			t.Fatalf("sealed %v: fetches marked %v, want one marked %v", c.key != nil, o.marks, c.want)
		}
	}
}
