package volumeserver_test

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/testcluster"
)

// TestReaderAuthenticatesSkipsTheChecksum: a whole read of a large needle
// whose bytes changed on disk ends short, unless the reader says it checks
// the bytes itself (client.HeaderReaderAuthenticates, sent by client.Get
// under chunk.Authenticated): then the volume server spares its CRC pass and
// sends them all.
func TestReaderAuthenticatesSkipsTheChecksum(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}}})
	cl, err := client.New(client.Config{Masters: c.MasterAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 3<<20)
	r := rand.New(rand.NewPCG(5, 6))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	url := assign(t, cl)
	if rep := do(t, "PUT", url, bytes.NewReader(data), nil); rep.status != http.StatusCreated {
		t.Fatalf("PUT: %d %s", rep.status, rep.body)
	}
	id, err := fid.Parse(url[bytes.LastIndexByte([]byte(url), '/')+1:])
	if err != nil {
		t.Fatal(err)
	}
	read := func(ctx context.Context) ([]byte, error) {
		body, _, err := cl.Get(ctx, id, nil)
		if err != nil {
			return nil, err
		}
		defer body.Close()
		return io.ReadAll(body)
	}
	if got, err := read(context.Background()); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read before: %d bytes, %v", len(got), err)
	}

	// Flip a byte in the middle of the needle's data: the .dat holds only it.
	var dat string
	var size int64
	for _, dir := range c.Volume[0].Dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.dat"))
		for _, f := range files {
			if st, err := os.Stat(f); err == nil && st.Size() > size {
				dat, size = f, st.Size()
			}
		}
	}
	f, err := os.OpenFile(dat, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := []byte{0}
	f.ReadAt(b, size/2)
	b[0] ^= 1
	f.WriteAt(b, size/2)
	f.Close()

	if got, err := read(context.Background()); err == nil && len(got) == len(data) {
		t.Fatal("a changed needle was read whole without the reader's mark")
	}
	// A range to the end is a whole read, checked; the first half is not.
	whole, _, err := cl.Get(context.Background(), id, &client.Range{Offset: 0})
	if err == nil {
		got, err := io.ReadAll(whole)
		whole.Close()
		if err == nil && len(got) == len(data) {
			t.Fatal("a changed needle was read whole through bytes=0-")
		}
	}
	half, _, err := cl.Get(context.Background(), id, &client.Range{Offset: 0, Length: int64(len(data) / 4)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(half)
	half.Close()
	if err != nil || !bytes.Equal(got, data[:len(data)/4]) {
		t.Fatalf("the unchanged first quarter: %d bytes, %v", len(got), err)
	}
	got, err = read(chunk.Authenticated(context.Background()))
	if err != nil || len(got) != len(data) || bytes.Equal(got, data) {
		t.Fatalf("with the mark: %d bytes, equal %v, %v; want all, changed", len(got), bytes.Equal(got, data), err)
	}
}
