package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/ttl"
	"github.com/kelpfs/kelp/internal/vfs"
	"github.com/kelpfs/kelp/internal/volume"
)

type changes chan struct{}

func (c changes) wait(t *testing.T, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(5 * time.Second):
		t.Fatalf("no OnChange after %s", what)
	}
}

func newStore(t *testing.T, fsys vfs.FS, ch changes) *Store {
	t.Helper()
	s, err := New(Config{
		Disks: []DiskConfig{{Dir: "/d1", MaxVolumes: 2}, {Dir: "/d2", MaxVolumes: 3}},
		FS:    fsys, VolumeSizeLimit: 1 << 20,
		OnChange: func() {
			select {
			case ch <- struct{}{}:
			default:
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func write(t *testing.T, s *Store, id uint32, key uint64, data []byte) error {
	t.Helper()
	v, ok := s.Volume(id)
	if !ok {
		t.Fatalf("volume %d missing", id)
	}
	_, err := v.Write(context.Background(), needle.Meta{Key: key, Cookie: 1}, bytes.NewReader(data), int64(len(data)))
	return err
}

func TestAllocateAcrossDisksAndReload(t *testing.T) {
	fsys := vfs.NewMem()
	ch := make(changes, 1)
	s := newStore(t, fsys, ch)
	r := replication.Code{SameRack: 1}
	for id := uint32(1); id <= 5; id++ {
		coll := ""
		if id%2 == 0 {
			coll = "my_photos"
		}
		if err := s.Allocate(id, coll, r, ttl.TTL{}); err != nil {
			t.Fatalf("allocate %d: %v", id, err)
		}
		ch.wait(t, "allocate")
	}
	if err := s.Allocate(6, "", r, ttl.TTL{}); !errors.Is(err, ErrNoSlot) {
		t.Fatalf("sixth volume: %v", err)
	}
	if err := s.Allocate(3, "", r, ttl.TTL{}); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate id: %v", err)
	}
	st := s.Status()
	if len(st) != 2 || len(st[0].Volumes) != 2 || len(st[1].Volumes) != 3 {
		t.Fatalf("status %+v", st)
	}
	if err := write(t, s, 2, 9, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if names, _ := fsys.ReadDir("/d1"); len(names) == 0 {
		t.Fatal("no files on d1")
	}

	s = newStore(t, fsys, ch)
	defer s.Close()
	total := 0
	for _, d := range s.Status() {
		total += len(d.Volumes)
	}
	if total != 5 {
		t.Fatalf("reloaded %d volumes, want 5", total)
	}
	v, ok := s.Volume(2)
	if !ok || v.Stats().Collection != "my_photos" || v.Stats().Replication != r {
		t.Fatalf("volume 2 after reload: %+v", v.Stats())
	}
	o, err := v.Read(9, 1)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(o)
	o.Close()
	if string(got) != "kept" {
		t.Fatalf("data %q", got)
	}
	if err := s.Delete(2); err != nil {
		t.Fatal(err)
	}
	ch.wait(t, "delete")
	if _, ok := s.Volume(2); ok {
		t.Fatal("deleted volume still present")
	}
	if err := s.Delete(2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if err := s.Allocate(6, "", r, ttl.TTL{}); err != nil {
		t.Fatalf("slot freed by delete not reusable: %v", err)
	}
}

func TestMarkFullAndVacuum(t *testing.T) {
	ch := make(changes, 1)
	s := newStore(t, vfs.NewMem(), ch)
	defer s.Close()
	if err := s.Allocate(1, "", replication.Code{}, ttl.TTL{}); err != nil {
		t.Fatal(err)
	}
	ch.wait(t, "allocate")
	if err := s.MarkReadOnly(1, true); err != nil {
		t.Fatal(err)
	}
	ch.wait(t, "mark read-only")
	if err := write(t, s, 1, 1, []byte("x")); !errors.Is(err, volume.ErrReadOnly) {
		t.Fatalf("write to read-only: %v", err)
	}
	s.MarkReadOnly(1, false)
	ch.wait(t, "mark writable")
	var err error
	for k := uint64(1); err == nil; k++ {
		err = write(t, s, 1, k, make([]byte, 100<<10))
	}
	if !errors.Is(err, volume.ErrFull) {
		t.Fatalf("filling: %v", err)
	}
	ch.wait(t, "became full")
	if err := s.MarkReadOnly(99, true); !errors.Is(err, ErrNotFound) {
		t.Fatalf("mark missing: %v", err)
	}

	v, _ := s.Volume(1)
	for k := uint64(1); k <= 5; k++ {
		if _, err := v.Delete(context.Background(), k, 1); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.Vacuum(context.Background(), 1, 0.9)
	if err != nil || res.Vacuumed {
		t.Fatalf("vacuum under threshold: %+v %v", res, err)
	}
	res, err = s.Vacuum(context.Background(), 1, 0.3)
	if err != nil || !res.Vacuumed || res.SizeAfter >= res.SizeBefore || res.GarbageRatioBefore < 0.3 {
		t.Fatalf("vacuum: %+v %v", res, err)
	}
	if err := write(t, s, 1, 100, []byte("room again")); err != nil {
		t.Fatalf("write after vacuum: %v", err)
	}
	s.SetVolumeSizeLimit(2 << 20)
	if err := write(t, s, 1, 101, make([]byte, 600<<10)); err != nil {
		t.Fatalf("write after raising the limit: %v", err)
	}
}

func TestBrokenVolumeIsSkipped(t *testing.T) {
	fsys := vfs.NewMem()
	s := newStore(t, fsys, make(changes, 1))
	s.Allocate(1, "", replication.Code{}, ttl.TTL{})
	s.Allocate(2, "", replication.Code{}, ttl.TTL{})
	s.Close()
	vfs.WriteFileAtomic(fsys, "/d2/1.dat", []byte("not a volume"), 0o644) // volume 1 went to d2, the emptier disk
	vfs.WriteFileAtomic(fsys, "/d1/notes.txt", []byte("ignored"), 0o644)
	s = newStore(t, fsys, make(changes, 1))
	defer s.Close()
	n := 0
	for _, d := range s.Status() {
		n += len(d.Volumes)
	}
	if n != 1 {
		t.Fatalf("loaded %d volumes, want the 1 intact one", n)
	}
}

func TestParseFileName(t *testing.T) {
	cases := []struct {
		in   string
		coll string
		id   uint32
		ok   bool
	}{
		{"3.dat", "", 3, true}, {"pics_12.dat", "pics", 12, true}, {"a_b_7.dat", "a_b", 7, true},
		{"3.idx", "", 0, false}, {"_3.dat", "", 0, false}, {"0.dat", "", 0, false},
		{"x.dat", "", 0, false}, {"03.dat", "", 0, false}, {"3.cpd", "", 0, false},
	}
	for _, c := range cases {
		coll, id, ok := ParseFileName(c.in)
		if ok != c.ok || coll != c.coll || id != c.id {
			t.Errorf("ParseFileName(%q) = %q %d %v", c.in, coll, id, ok)
		}
	}
	if got := volume.BaseName("pics", 12) + ".dat"; fmt.Sprint(got) != "pics_12.dat" {
		t.Fatalf("BaseName = %q", got)
	}
}

func TestRealDisk(t *testing.T) {
	dir := t.TempDir()
	s, err := New(Config{Disks: []DiskConfig{{Dir: dir, MaxVolumes: 1}}, Fsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Allocate(1, "", replication.Code{}, ttl.TTL{}); err != nil {
		t.Fatal(err)
	}
	if err := write(t, s, 1, 1, []byte("on disk")); err != nil {
		t.Fatal(err)
	}
	if st := s.Status(); st[0].FreeBytes == 0 {
		t.Fatalf("FreeBytes not reported: %+v", st)
	}
}
