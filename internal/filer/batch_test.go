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
