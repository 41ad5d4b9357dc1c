package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/kelpfs/kelp/internal/filer/store"
)

// GiveUp checks that a transaction that conflicts on every attempt ends in
// store.ErrConflict without writing. s must be opened with a small retry
// bound; other is a second instance on the same namespace, which
// interferes after each of s's reads.
func GiveUp(t *testing.T, s, other store.Store) {
	key := []byte("always-contended")
	put(t, s, key, []byte("0"))
	calls := 0
	err := s.Update(context.Background(), func(tx store.Tx) error {
		calls++
		if _, err := tx.Get(key); err != nil {
			return err
		}
		put(t, other, key, []byte{byte('0' + calls)})
		return tx.Put(key, []byte("mine"))
	})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Update under constant interference: %v after %d runs, want ErrConflict", err, calls)
	}
	if got := mustGet(t, other, key); string(got) != string(rune('0'+calls)) {
		t.Fatalf("after giving up: value %q, want the last interfering write %q", got, string(rune('0'+calls)))
	}
}
