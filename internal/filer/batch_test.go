package filer

import (
	"context"
	"errors"
	"testing"
)

// A batch commits all its operations or none.
func TestAtomicallyAllOrNothing(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	e.write(t, "/cur", []byte("old"))
	boom := errors.New("boom")
	err := e.f.Atomically(ctx, func(b Batch) error {
		if err := b.Rename("/cur", "/archive/v1"); err != nil {
			return err
		}
		if err := b.Create(&Entry{Path: "/cur", Mode: 0o644}, CreateOptions{Exclusive: true}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("batch: %v", err)
	}
	if got := e.read(t, "/cur"); string(got) != "old" {
		t.Fatalf("a failed batch changed /cur: %q", got)
	}
	if _, err := e.f.FindEntry(ctx, "/archive/v1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a failed batch left /archive/v1: %v", err)
	}

	err = e.f.Atomically(ctx, func(b Batch) error {
		cur, err := b.Find("/cur")
		if err != nil || cur.Size != 3 {
			return errors.Join(err, errors.New("find"))
		}
		if err := b.Rename("/cur", "/archive/v1"); err != nil {
			return err
		}
		if err := b.Delete("/nothing", false); !errors.Is(err, ErrNotFound) {
			return errors.Join(err, errors.New("delete of a missing entry"))
		}
		return b.Create(&Entry{Path: "/cur", Mode: 0o644}, CreateOptions{Exclusive: true})
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.read(t, "/archive/v1"); string(got) != "old" {
		t.Fatalf("archived content %q", got)
	}
	if ent, err := e.f.FindEntry(ctx, "/cur"); err != nil || ent.Size != 0 {
		t.Fatalf("new /cur: %+v %v", ent, err)
	}
	for _, bad := range []func(Batch) error{
		func(b Batch) error { return b.Rename("/", "/x") },
		func(b Batch) error { return b.Delete("/", true) },
		func(b Batch) error { return b.Create(&Entry{Path: "/a/../b"}, CreateOptions{}) },
	} {
		if err := e.f.Atomically(ctx, bad); err == nil {
			t.Error("an impossible operation passed")
		}
	}
}

// Update in a batch changes an entry's attributes together with the
// batch's other operations, keeps the chunks it keeps and collects the rest.
func TestBatchUpdate(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	e.write(t, "/f", []byte("content"))
	if err := e.f.Mkdir(ctx, "/d", 0o755, true); err != nil {
		t.Fatal(err)
	}
	err := e.f.Atomically(ctx, func(b Batch) error {
		d, err := b.Find("/d")
		if err != nil {
			return err
		}
		d.Xattrs = map[string][]byte{"flag": []byte("1")}
		if err := b.Update(d); err != nil {
			return err
		}
		f, err := b.Find("/f")
		if err != nil {
			return err
		}
		f.Mime = "text/plain"
		if err := b.Update(f); err != nil {
			return err
		}
		if err := b.Update(&Entry{Path: "/missing", Mode: 0o644}); !errors.Is(err, ErrNotFound) {
			return errors.Join(err, errors.New("update of a missing entry"))
		}
		if err := b.Update(&Entry{Path: "/d", Mode: 0o644}); !errors.Is(err, ErrInvalid) {
			return errors.Join(err, errors.New("a directory updated into a file"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := e.f.FindEntry(ctx, "/d"); err != nil || string(d.Xattrs["flag"]) != "1" {
		t.Fatalf("/d after the batch: %+v %v", d, err)
	}
	if got := e.read(t, "/f"); string(got) != "content" {
		t.Fatalf("/f content %q", got)
	}
	// Dropping the chunks in an update collects them.
	err = e.f.Atomically(ctx, func(b Batch) error {
		f, err := b.Find("/f")
		if err != nil {
			return err
		}
		f.Chunks, f.Size, f.MD5 = nil, 0, nil
		return b.Update(f)
	})
	if err != nil {
		t.Fatal(err)
	}
	e.checkNoLeak(t)
}
