package filer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/filer/store"
)

// faultStore fails the n-th Put of every Update from failAt on.
type faultStore struct {
	store.Store
	failAt int // 0: never
}

var errDisk = errors.New("injected store failure")

type faultTx struct {
	store.Tx
	puts, failAt int
}

func (t *faultTx) Put(k, v []byte) error {
	t.puts++
	if t.failAt > 0 && t.puts >= t.failAt {
		return errDisk
	}
	return t.Tx.Put(k, v)
}

func (s *faultStore) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	return s.Store.Update(ctx, func(tx store.Tx) error {
		return fn(&faultTx{Tx: tx, failAt: s.failAt})
	})
}

// TestStoreFailureLeavesNoHalfRenamedTree fails a directory rename at every
// possible write and checks the error is a store error (a 5xx, not a
// client mistake) and the tree is exactly as before.
func TestStoreFailureLeavesNoHalfRenamedTree(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	for i := 0; i < 12; i++ {
		e.write(t, fmt.Sprintf("/src/d%d/f%d", i%3, i), []byte{byte(i)})
	}
	before := snapshot(t, e.st)
	fs := &faultStore{Store: e.st}
	f, err := New(Config{Store: fs, Blobs: e.blobs, GCInterval: 1 << 62, GCDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 1
	for ; ; n++ {
		fs.failAt = n
		err := f.Rename(ctx, "/src", "/dst/deeper")
		if err == nil {
			break // every write of the rename was tried and failed once
		}
		if !errors.Is(err, errDisk) || !strings.HasPrefix(err.Error(), "filer: store:") {
			t.Fatalf("write %d: error %v is not a wrapped store failure", n, err)
		}
		if after := snapshot(t, e.st); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("failure at write %d changed the tree", n)
		}
	}
	if n < 15 { // 15 moved entries, a new parent, events
		t.Fatalf("the rename made only %d writes", n-1)
	}
	if got := e.read(t, "/dst/deeper/d1/f4"); len(got) != 1 || got[0] != 4 {
		t.Fatalf("content after rename %v", got)
	}
}
