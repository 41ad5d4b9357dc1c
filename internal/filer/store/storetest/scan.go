package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kelpfs/kelp/internal/filer/store"
)

// alphabet holds the bytes where ordering bugs hide: 0x00 (C strings,
// separators), 0xff (prefix ends), and bytes either side of 0x7f (signed
// comparison).
var alphabet = []byte{0x00, 0x01, 'a', 0x7f, 0x80, 0xfe, 0xff}

func testBinaryKeyOrder(t *testing.T, b Backend) {
	s := b.Fresh(t)(t)
	keys := [][]byte{
		{0xff, 0xff}, {0xff}, {0x00}, {0x00, 0x00}, []byte("a"), []byte("a\x00"),
		[]byte("a\x00b"), []byte("a\xff"), {0x80}, {0x7f, 0xff}, []byte("ab"), {0xfe, 0xff, 0x00},
	}
	for i, k := range keys {
		put(t, s, k, []byte{byte(i)})
	}
	want := slices.Clone(keys)
	slices.SortFunc(want, bytes.Compare)
	got := scanAll(t, s, nil, nil, 0)
	if len(got) != len(want) {
		t.Fatalf("scan returned %d keys, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].k != string(want[i]) {
			t.Fatalf("key %d = %x, want %x (bytewise order)", i, got[i].k, want[i])
		}
	}
	for i, k := range keys {
		if v := mustGet(t, s, k); !bytes.Equal(v, []byte{byte(i)}) {
			t.Fatalf("get %x = %x, want %x", k, v, i)
		}
	}
}

// testScanBounds compares scans against a sorted model over keys drawn
// from alphabet, for bounds drawn from it too.
func testScanBounds(t *testing.T, b Backend) {
	s := b.Fresh(t)(t)
	rng := rand.New(rand.NewPCG(1, 2))
	randKey := func() []byte {
		k := make([]byte, 1+rng.IntN(3))
		for i := range k {
			k[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return k
	}
	model := map[string]string{}
	err := s.Update(context.Background(), func(tx store.Tx) error {
		clear(model)
		for i := 0; i < 60; i++ {
			k, v := randKey(), fmt.Sprint(i)
			model[string(k)] = v
			if err := tx.Put(k, []byte(v)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sorted := make([]string, 0, len(model))
	for k := range model {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	expect := func(start, end []byte, limit int) []pair {
		var out []pair
		for _, k := range sorted {
			if (start == nil || k >= string(start)) && (end == nil || k < string(end)) {
				if limit > 0 && len(out) == limit {
					break
				}
				out = append(out, pair{k, model[k]})
			}
		}
		return out
	}
	bound := func() []byte {
		if rng.IntN(4) == 0 {
			return nil
		}
		return randKey()
	}
	for i := 0; i < 80; i++ {
		start, end, limit := bound(), bound(), rng.IntN(5)*rng.IntN(5)
		if i%10 == 0 && start != nil { // prefix scans
			end = store.PrefixEnd(start)
		}
		want := expect(start, end, limit)
		if got := scanAll(t, s, start, end, limit); !samePairs(got, want) {
			t.Fatalf("Scan [%x,%x) limit %d:\n got %q\nwant %q", start, end, limit, got, want)
		}
		err := s.View(context.Background(), func(tx store.ReadTx) error {
			got, err := txScanAll(tx, start, end, limit)
			if err == nil && !samePairs(got, want) {
				err = fmt.Errorf("got %q\nwant %q", got, want)
			}
			return err
		})
		if err != nil {
			t.Fatalf("View Scan [%x,%x) limit %d: %v", start, end, limit, err)
		}
	}
}

func testScanStop(t *testing.T, b Backend) {
	s := b.Fresh(t)(t)
	for i := 0; i < 10; i++ {
		put(t, s, []byte{'k', byte('0' + i)}, nil)
	}
	calls := 0
	err := s.Scan(context.Background(), nil, nil, 0, func(k, v []byte) error {
		calls++
		if calls == 3 {
			return store.ErrStopScan
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("ErrStopScan: Scan = %v after %d calls, want nil after 3", err, calls)
	}
	boom := errors.New("boom")
	calls = 0
	err = s.Scan(context.Background(), nil, nil, 0, func(k, v []byte) error {
		calls++
		return boom
	})
	if !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("callback error: Scan = %v after %d calls, want boom after 1", err, calls)
	}
	err = s.View(context.Background(), func(tx store.ReadTx) error {
		calls = 0
		err := tx.Scan(nil, nil, 0, func(k, v []byte) error {
			calls++
			if calls == 2 {
				return store.ErrStopScan
			}
			return nil
		})
		if err != nil || calls != 2 {
			return fmt.Errorf("tx scan stopped = %v after %d calls, want nil after 2", err, calls)
		}
		return tx.Scan(nil, nil, 0, func(k, v []byte) error { return boom })
	})
	if !errors.Is(err, boom) {
		t.Fatalf("View: %v, want boom", err)
	}
}

// testScanManyPages scans more pairs than a server backend fetches at once,
// and reads the store from inside the callback (which a backend streaming
// rows over its only connection would deadlock on).
func testScanManyPages(t *testing.T, b Backend) {
	s := b.Fresh(t)(t)
	const n = 1200
	err := s.Update(context.Background(), func(tx store.Tx) error {
		for i := 0; i < n; i++ {
			if err := tx.Put([]byte(fmt.Sprintf("p/%05d", i)), []byte(fmt.Sprint(i))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	err = s.Scan(context.Background(), []byte("p/"), store.PrefixEnd([]byte("p/")), 0, func(k, v []byte) error {
		if want := fmt.Sprintf("p/%05d", i); string(k) != want || string(v) != fmt.Sprint(i) {
			return fmt.Errorf("pair %d = %q=%q, want %q", i, k, v, want)
		}
		if i%100 == 0 {
			if _, err := s.Get(context.Background(), k); err != nil {
				return fmt.Errorf("Get inside Scan: %w", err)
			}
		}
		i++
		return nil
	})
	if err != nil || i != n {
		t.Fatalf("Scan: %v after %d pairs, want %d", err, i, n)
	}
	for _, limit := range []int{255, 256, 257, 600} {
		got := scanAll(t, s, []byte("p/00100"), nil, limit)
		if len(got) != limit || got[0].k != "p/00100" || got[limit-1].k != fmt.Sprintf("p/%05d", 100+limit-1) {
			t.Fatalf("Scan from p/00100 limit %d: %d pairs", limit, len(got))
		}
	}
	err = s.Update(context.Background(), func(tx store.Tx) error {
		i = 0
		err := tx.Scan(nil, nil, 0, func(k, v []byte) error {
			if i%100 == 0 {
				if _, err := tx.Get(k); err != nil {
					return fmt.Errorf("tx.Get inside tx.Scan: %w", err)
				}
			}
			i++
			return nil
		})
		if err == nil && i != n {
			err = fmt.Errorf("tx scan saw %d pairs, want %d", i, n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func testOwnership(t *testing.T, b Backend) {
	s := b.Fresh(t)(t)
	k, v := []byte("key"), []byte("value")
	put(t, s, k, v)
	k[0], v[0] = 'X', 'X' // the caller may reuse its slices after Put
	got := mustGet(t, s, []byte("key"))
	if string(got) != "value" {
		t.Fatalf("store kept the caller's slice: got %q", got)
	}
	got[0] = 'Y' // the caller owns what Get returns
	if again := mustGet(t, s, []byte("key")); string(again) != "value" {
		t.Fatalf("Get returned a slice the store still uses: %q", again)
	}
	err := s.Update(context.Background(), func(tx store.Tx) error {
		buf := []byte("key2")
		if err := tx.Put(buf, buf); err != nil {
			return err
		}
		copy(buf, "zzzz") // before commit, too
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, s, []byte("key2")); string(got) != "key2" {
		t.Fatalf("tx kept the caller's slice: %q", got)
	}
	wantMissing(t, s, []byte("zzzz"))
}
