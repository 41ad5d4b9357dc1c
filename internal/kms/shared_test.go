package kms

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/chunk/chunktest"
	"github.com/kelpfs/kelp/internal/filer"
	"github.com/kelpfs/kelp/internal/filer/store/pebble"
	"github.com/kelpfs/kelp/internal/sse"
)

func testFiler(t *testing.T) *filer.Filer {
	t.Helper()
	st, err := pebble.Open(t.TempDir(), &pebble.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	f, err := filer.New(filer.Config{Store: st, Blobs: chunktest.New(), ChunkSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close(); st.Close() })
	return f
}

func sharedService(t *testing.T, dir string, master []byte, f *filer.Filer) *Service {
	t.Helper()
	s, err := Open(dir, master)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Share(FilerStore(f)); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSharedKeys: two gateways over one filer, each with its own key
// directory and the same master key, see each other's keys; keys already
// in a directory are imported on the first start; a gateway with another
// master key is refused.
func TestSharedKeys(t *testing.T) {
	f := testFiler(t)
	master := sse.NewKey()
	a := sharedService(t, t.TempDir(), master, f)

	// B had a key of its own in its directory before the keys were shared.
	dirB := t.TempDir()
	pre, err := Open(dirB, master)
	if err != nil {
		t.Fatal(err)
	}
	old, err := pre.Create("old", "")
	if err != nil {
		t.Fatal(err)
	}
	b := sharedService(t, dirB, master, f)

	k, err := a.Create("photos", "")
	if err != nil {
		t.Fatal(err)
	}
	dk := sse.NewKey()
	id, sealed, err := b.Seal("alias/photos", dk, []byte("ctx")) // a key made through A, at once
	if err != nil || id != k.ID {
		t.Fatalf("B seals under A's key: %s %v", id, err)
	}
	if got, err := a.Unseal(id, sealed, []byte("ctx")); err != nil || !bytes.Equal(got, dk) {
		t.Fatalf("A opens what B sealed: %v", err)
	}
	if _, sealed, err := a.Seal("alias/old", dk, nil); err != nil {
		t.Fatalf("A uses the key imported from B's directory: %v", err)
	} else if _, err := b.Unseal(old.ID, sealed, nil); err != nil {
		t.Fatal(err)
	}
	// `kelp kms list` on B's directory shows every key (the file mirrors the filer).
	offline, err := Open(dirB, master)
	if err != nil {
		t.Fatal(err)
	}
	if l, _ := offline.List(); len(l) != 2 {
		t.Fatalf("B's key file lists %d keys, want 2", len(l))
	}

	// `kelp kms create` in A's directory (another process): A's background
	// refresh passes it to the filer, where B finds it.
	dirA := a.dir
	cli, err := Open(dirA, master)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Create("fromcli", ""); err != nil {
		t.Fatal(err)
	}
	if err := a.Refresh(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Seal("alias/fromcli", dk, nil); err != nil {
		t.Fatalf("B uses a key made with kelp kms in A's directory: %v", err)
	}

	// Disabled through A: B refuses it within SharedRefresh.
	if _, err := a.SetEnabled("alias/photos", false); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * SharedRefresh)
	for {
		_, err := b.Unseal(id, sealed, []byte("ctx"))
		if errors.Is(err, ErrDisabled) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B still uses the key A disabled: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, bounded by the deadline
	}

	// One default key for both.
	da, err := a.DefaultKey()
	if err != nil {
		t.Fatal(err)
	}
	if db, err := b.DefaultKey(); err != nil || db.ID != da.ID {
		t.Fatalf("B's default key %s %v, want %s", db.ID, err, da.ID)
	}

	// Another master key: refused with a clear error, nothing written.
	c, err := Open(t.TempDir(), sse.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Share(FilerStore(f)); !errors.Is(err, ErrMasterMismatch) {
		t.Fatalf("a gateway with another master key: %v", err)
	}
	if l, _ := a.List(); len(l) != 4 {
		t.Fatalf("%d keys after the refused gateway, want 4", len(l))
	}
}

func TestMergeLastChangeWins(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	x := &storedKey{KeyInfo: KeyInfo{ID: "x", Enabled: true, Created: t0}}
	xOff := &storedKey{KeyInfo: KeyInfo{ID: "x", Enabled: false, Created: t0}, Updated: t0.Add(time.Minute)}
	y := &storedKey{KeyInfo: KeyInfo{ID: "y", Enabled: true, Created: t0.Add(time.Second)}}
	for _, m := range [][]*storedKey{merge([]*storedKey{x}, []*storedKey{xOff, y}), merge([]*storedKey{xOff, y}, []*storedKey{x})} {
		if len(m) != 2 || m[0].ID != "x" || m[0].Enabled || m[1].ID != "y" {
			t.Fatalf("merge: %+v %+v", m[0], m[1])
		}
	}
}
