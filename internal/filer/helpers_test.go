package filer

import (
	"bytes"
	"context"
	"io"
	"slices"
	"testing"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/chunk/chunktest"
	"github.com/kelpfs/kelp/internal/filer/store"
	"github.com/kelpfs/kelp/internal/filer/store/pebble"
)

func openPebble(t testing.TB, dir string) store.Store {
	t.Helper()
	s, err := pebble.Open(dir, &pebble.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type env struct {
	f     *Filer
	st    store.Store
	blobs *chunktest.Mem
	dir   string
}

func newEnv(t testing.TB, cfg Config) *env {
	t.Helper()
	e := &env{dir: t.TempDir(), blobs: chunktest.New()}
	e.st = openPebble(t, e.dir)
	cfg.Store, cfg.Blobs = e.st, e.blobs
	if cfg.GCInterval == 0 {
		cfg.GCInterval = 1 << 62 // tests drain explicitly
	}
	if cfg.GCDelay == 0 {
		cfg.GCDelay = -1 // and at once
	}
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.f = f
	t.Cleanup(func() {
		e.f.Close()
		e.st.Close()
	})
	return e
}

// restart closes the filer and its store and opens both again.
func (e *env) restart(t testing.TB, cfg Config) {
	t.Helper()
	e.f.Close()
	e.st.Close()
	e.st = openPebble(t, e.dir)
	cfg.Store, cfg.Blobs = e.st, e.blobs
	if cfg.GCInterval == 0 {
		cfg.GCInterval = 1 << 62
	}
	if cfg.GCDelay == 0 {
		cfg.GCDelay = -1
	}
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.f = f
}

func (e *env) read(t testing.TB, p string) []byte {
	t.Helper()
	ent, err := e.f.FindEntry(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.f.Open(context.Background(), ent)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (e *env) write(t testing.TB, p string, data []byte) *Entry {
	t.Helper()
	ent, err := e.f.WriteFile(context.Background(), p, bytes.NewReader(data), WriteOptions{SizeHint: int64(len(data))})
	if err != nil {
		t.Fatal(err)
	}
	return ent
}

// referenced returns every blob the namespace references, manifests
// expanded, sorted.
func (e *env) referenced(t testing.TB) []string {
	t.Helper()
	var out []string
	ctx := context.Background()
	err := e.st.View(ctx, func(tx store.ReadTx) error {
		out = out[:0]
		return walkTree(tx, "/", func(k, v []byte) error {
			cs, err := entryChunks(v)
			if err != nil {
				return err
			}
			for _, c := range cs {
				out = append(out, c.FID)
				if c.Manifest {
					sub, err := chunk.ReadManifest(ctx, e.blobs, c)
					if err != nil {
						return err
					}
					for _, s := range sub {
						out = append(out, s.FID)
					}
				}
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// checkNoLeak drains the GC queue and checks that exactly the referenced
// blobs are alive.
func (e *env) checkNoLeak(t testing.TB) {
	t.Helper()
	if _, err := e.f.CollectGarbage(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, _ := e.f.PendingGarbage(context.Background()); n != 0 {
		t.Fatalf("%d blobs still queued", n)
	}
	ref, live := e.referenced(t), e.blobs.Live()
	if !slices.Equal(ref, live) {
		t.Fatalf("referenced %d blobs, %d alive:\nref  %v\nlive %v", len(ref), len(live), ref, live)
	}
}
