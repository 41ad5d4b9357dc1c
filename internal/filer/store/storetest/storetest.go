package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/kelpfs/kelp/internal/filer/store"
)

// Opener opens a new instance of a store on one namespace. It registers
// tb.Cleanup to close the instance, so tests may close it early or not at
// all (Close is idempotent).
type Opener func(tb testing.TB) store.Store

// Backend describes a backend under test.
type Backend struct {
	// Fresh prepares a new, empty namespace for one test (a directory, a
	// table, a key prefix) and returns an Opener for it. Every call of the
	// Opener gives a separate instance on that same namespace, which is how
	// the suite tests persistence across close/reopen and sharing.
	Fresh func(tb testing.TB) Opener
	// Shared says that several instances may be open on one namespace at
	// once (the server backends). The suite then runs its concurrency
	// cases across two instances too.
	Shared bool
}

// Run runs the conformance suite as subtests of t.
func Run(t *testing.T, b Backend) {
	cases := []struct {
		name string
		fn   func(t *testing.T, b Backend)
	}{
		{"GetMissing", testGetMissing},
		{"PutGetDelete", testPutGetDelete},
		{"EmptyValue", testEmptyValue},
		{"LargeValue", testLargeValue},
		{"Limits", testLimits},
		{"BinaryKeyOrder", testBinaryKeyOrder},
		{"ScanBounds", testScanBounds},
		{"ScanStop", testScanStop},
		{"ScanManyPages", testScanManyPages},
		{"Ownership", testOwnership},
		{"TxReadsOwnWrites", testTxReadsOwnWrites},
		{"TxAbort", testTxAbort},
		{"TxDone", testTxDone},
		{"ConcurrentIncrements", testConcurrentIncrements},
		{"NoPartialReads", testNoPartialReads},
		{"Sequence", testSequence},
		{"Retry", testRetry},
		{"Reopen", testReopen},
		{"Context", testContext},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, b) })
	}
}

// Helpers. They fail the test at once, so call them from the test goroutine.

func put(t testing.TB, s store.Store, k, v []byte) {
	t.Helper()
	err := s.Update(context.Background(), func(tx store.Tx) error { return tx.Put(k, v) })
	if err != nil {
		t.Fatalf("put %q: %v", k, err)
	}
}

func del(t testing.TB, s store.Store, k []byte) {
	t.Helper()
	if err := s.Update(context.Background(), func(tx store.Tx) error { return tx.Delete(k) }); err != nil {
		t.Fatalf("delete %q: %v", k, err)
	}
}

func mustGet(t testing.TB, s store.Store, k []byte) []byte {
	t.Helper()
	v, err := s.Get(context.Background(), k)
	if err != nil {
		t.Fatalf("get %q: %v", k, err)
	}
	return v
}

func wantMissing(t testing.TB, s store.Store, k []byte) {
	t.Helper()
	v, err := s.Get(context.Background(), k)
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get %q = %q, %v; want ErrNotFound", k, v, err)
	}
}

type pair struct{ k, v string }

// scanAll collects a Store.Scan into pairs.
func scanAll(t testing.TB, s store.Store, start, end []byte, limit int) []pair {
	t.Helper()
	var got []pair
	err := s.Scan(context.Background(), start, end, limit, func(k, v []byte) error {
		got = append(got, pair{string(k), string(v)})
		return nil
	})
	if err != nil {
		t.Fatalf("scan [%q,%q) limit %d: %v", start, end, limit, err)
	}
	return got
}

func txScanAll(tx store.ReadTx, start, end []byte, limit int) ([]pair, error) {
	var got []pair
	err := tx.Scan(start, end, limit, func(k, v []byte) error {
		got = append(got, pair{string(k), string(v)})
		return nil
	})
	return got, err
}

func samePairs(a, b []pair) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func testGetMissing(t *testing.T, b Backend) {
	s := b.Fresh(t)(t)
	wantMissing(t, s, []byte("nope"))
	err := s.View(context.Background(), func(tx store.ReadTx) error {
		_, err := tx.Get([]byte("nope"))
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("View Get of a missing key: %v, want ErrNotFound", err)
	}
	if got := scanAll(t, s, nil, nil, 0); len(got) != 0 {
		t.Fatalf("scan of an empty store = %v", got)
	}
}

func testPutGetDelete(t *testing.T, b Backend) {
	s := b.Fresh(t)(t)
	k := []byte("dir/file")
	put(t, s, k, []byte("one"))
	if v := mustGet(t, s, k); string(v) != "one" {
		t.Fatalf("get = %q, want one", v)
	}
	put(t, s, k, []byte("two"))
	if v := mustGet(t, s, k); string(v) != "two" {
		t.Fatalf("get after overwrite = %q, want two", v)
	}
	del(t, s, k)
	wantMissing(t, s, k)
	del(t, s, k) // deleting an absent key is no error
	if got := scanAll(t, s, nil, nil, 0); len(got) != 0 {
		t.Fatalf("scan after delete = %v", got)
	}
}

func testEmptyValue(t *testing.T, b Backend) {
	s := b.Fresh(t)(t)
	for _, v := range [][]byte{nil, {}} {
		k := []byte(fmt.Sprintf("empty-%v", v == nil))
		put(t, s, k, v)
		got, err := s.Get(context.Background(), k)
		if err != nil || len(got) != 0 {
			t.Fatalf("get of empty value = %q, %v; want empty, nil", got, err)
		}
	}
	if got := scanAll(t, s, nil, nil, 0); len(got) != 2 || got[0].v != "" {
		t.Fatalf("scan = %q, want two empty values", got)
	}
}

func testLargeValue(t *testing.T, b Backend) {
	s := b.Fresh(t)(t)
	v := make([]byte, 1<<20)
	for i := range v {
		v[i] = byte(i*7 + i>>8)
	}
	put(t, s, []byte("big"), v)
	if got := mustGet(t, s, []byte("big")); !bytes.Equal(got, v) {
		t.Fatalf("1 MiB value came back with %d bytes, different", len(got))
	}
	if got := scanAll(t, s, nil, nil, 0); len(got) != 1 || got[0].v != string(v) {
		t.Fatalf("scan of the 1 MiB value differs")
	}
}

func testLimits(t *testing.T, b Backend) {
	s := b.Fresh(t)(t)
	ctx := context.Background()
	long := bytes.Repeat([]byte{0xff}, store.MaxKeySize)
	put(t, s, long, []byte("v"))
	if got := mustGet(t, s, long); string(got) != "v" {
		t.Fatalf("max-size key: got %q", got)
	}
	bad := map[string]func(tx store.Tx) error{
		"empty key":     func(tx store.Tx) error { return tx.Put(nil, []byte("v")) },
		"long key":      func(tx store.Tx) error { return tx.Put(append(long, 0), []byte("v")) },
		"large value":   func(tx store.Tx) error { return tx.Put([]byte("k"), make([]byte, store.MaxValueSize+1)) },
		"delete empty":  func(tx store.Tx) error { return tx.Delete(nil) },
		"get long":      func(tx store.Tx) error { _, err := tx.Get(append(long, 0)); return err },
		"get empty key": func(tx store.Tx) error { _, err := tx.Get([]byte{}); return err },
	}
	for name, fn := range bad {
		if err := s.Update(ctx, fn); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := s.Get(ctx, nil); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Store.Get(nil): %v, want ErrInvalid", err)
	}
	if got := scanAll(t, s, nil, nil, 0); len(got) != 1 {
		t.Fatalf("rejected writes left data: %d pairs", len(got))
	}
}
