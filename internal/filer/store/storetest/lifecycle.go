package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/kelpfs/kelp/internal/filer/store"
)

func testReopen(t *testing.T, b Backend) {
	open := b.Fresh(t)
	s := open(t)
	put(t, s, []byte("persist\x00me"), []byte("yes"))
	put(t, s, []byte("gone"), []byte("x"))
	del(t, s, []byte("gone"))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ctx := context.Background()
	if _, err := s.Get(ctx, []byte("persist\x00me")); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Get after Close: %v, want ErrClosed", err)
	}
	if err := s.Update(ctx, func(tx store.Tx) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Update after Close: %v, want ErrClosed", err)
	}
	if err := s.Scan(ctx, nil, nil, 0, func(k, v []byte) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Scan after Close: %v, want ErrClosed", err)
	}
	if err := s.View(ctx, func(tx store.ReadTx) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Errorf("View after Close: %v, want ErrClosed", err)
	}

	s2 := open(t)
	if v := mustGet(t, s2, []byte("persist\x00me")); string(v) != "yes" {
		t.Fatalf("after reopen: %q, want yes", v)
	}
	wantMissing(t, s2, []byte("gone"))
	if got := scanAll(t, s2, nil, nil, 0); len(got) != 1 {
		t.Fatalf("after reopen: %d pairs, want 1", len(got))
	}
}

func testContext(t *testing.T, b Backend) {
	s := b.Fresh(t)(t)
	for i := 0; i < 5; i++ {
		put(t, s, []byte(fmt.Sprint("k", i)), []byte("v"))
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Get(cancelled, []byte("k0")); !errors.Is(err, context.Canceled) {
		t.Errorf("Get: %v, want context.Canceled", err)
	}
	if err := s.Scan(cancelled, nil, nil, 0, func(k, v []byte) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Scan: %v, want context.Canceled", err)
	}
	if err := s.View(cancelled, func(tx store.ReadTx) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("View: %v, want context.Canceled", err)
	}
	err := s.Update(cancelled, func(tx store.Tx) error { return tx.Put([]byte("never"), nil) })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Update: %v, want context.Canceled", err)
	}
	wantMissing(t, s, []byte("never"))

	// Cancelled while fn runs: nothing may be committed.
	ctx, cancel := context.WithCancel(context.Background())
	err = s.Update(ctx, func(tx store.Tx) error {
		if err := tx.Put([]byte("late"), []byte("x")); err != nil {
			return err
		}
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Update cancelled inside fn: %v, want context.Canceled", err)
	}
	wantMissing(t, s, []byte("late"))

	// Cancelled during a scan: no more callbacks.
	ctx, cancel = context.WithCancel(context.Background())
	calls := 0
	err = s.Scan(ctx, nil, nil, 0, func(k, v []byte) error {
		calls++
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Errorf("Scan cancelled in its callback: %v after %d calls, want context.Canceled after 1", err, calls)
	}
}
