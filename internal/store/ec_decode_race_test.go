package store

import (
	"context"
	"errors"
	"testing"

	"github.com/kelpfs/kelp/internal/erasure"
	"github.com/kelpfs/kelp/internal/vfs"
	"github.com/kelpfs/kelp/internal/volume"
)

// TestEcDecodeKeepsLateDeletes: a delete journaled on the EC volume after
// the decode read the journal (it reached the holders while the decoded
// volume was being built) is applied to the decoded volume when the EC
// volume's last shards are removed here (ec.decode's switch), not lost.
func TestEcDecodeKeepsLateDeletes(t *testing.T) {
	s, files := encodedStore(t, vfs.NewCrash(1, vfs.CrashOptions{}))
	defer s.Close()
	ev, _ := s.EcVolume(7)
	if err := s.EcDecode(context.Background(), 7, "c", localFetch(ev)); err != nil {
		t.Fatal(err)
	}
	if err := ev.Delete(5); err != nil { // the late delete
		t.Fatal(err)
	}
	delete(files, 5)
	if err := s.EcUnmount(7, erasure.SetOf(0, 1, 2, 3, 4, 5)); err != nil {
		t.Fatal(err)
	}
	v, ok := s.Volume(7)
	if !ok {
		t.Fatal("no decoded volume")
	}
	for _, key := range []uint64{3, 5} {
		if _, err := v.Read(key, 9); !errors.Is(err, volume.ErrDeleted) && !errors.Is(err, volume.ErrNotFound) {
			t.Fatalf("decoded volume, needle %d deleted on the EC volume: %v", key, err)
		}
	}
	for key := range files {
		o, err := v.Read(key, 9)
		if err != nil {
			t.Fatalf("needle %d: %v", key, err)
		}
		o.Close()
	}
}

// TestEcDecodeSealsJournal: a delete whose handler took the EC volume
// before ec.decode's switch and journals only after the journal was
// applied to the decoded volume is refused with erasure.ErrSealed (its
// handler then deletes from the decoded volume), never journaled unseen;
// a switch that fails unseals the EC volume.
func TestEcDecodeSealsJournal(t *testing.T) {
	s, _ := encodedStore(t, vfs.NewCrash(1, vfs.CrashOptions{}))
	defer s.Close()
	ev, _ := s.EcVolume(7)
	if err := s.EcDecode(context.Background(), 7, "c", localFetch(ev)); err != nil {
		t.Fatal(err)
	}
	if err := s.EcUnmount(7, erasure.SetOf(0, 1, 2, 3, 4, 5)); err != nil {
		t.Fatal(err)
	}
	if err := ev.Delete(6); !errors.Is(err, erasure.ErrSealed) {
		t.Fatalf("delete on the EC volume after the switch: %v, want ErrSealed", err)
	}
	for _, k := range ev.Deleted() {
		if k == 6 {
			t.Fatal("needle 6 journaled on the EC volume after the switch")
		}
	}
	ev.Unseal()
	if err := ev.Delete(6); errors.Is(err, erasure.ErrSealed) {
		t.Fatalf("after Unseal: %v", err)
	}
}
