package consensus

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestLogStoreRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s, err := openLogStore(path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1700000000, 123)
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: i / 3, Type: raft.LogCommand, Data: []byte{byte(i)}, Extensions: []byte("x"), AppendedAt: at})
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(1, 4); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = openLogStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != 5 || last != 10 {
		t.Fatalf("first %d last %d", first, last)
	}
	var l raft.Log
	if err := s.GetLog(7, &l); err != nil || l.Term != 2 || !bytes.Equal(l.Data, []byte{7}) || string(l.Extensions) != "x" || !l.AppendedAt.Equal(at) {
		t.Fatalf("GetLog(7) = %+v, %v", l, err)
	}
	if err := s.GetLog(3, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("deleted log: %v", err)
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
		t.Fatalf("GetUint64 = %d, %v", v, err)
	}
	if _, err := s.Get([]byte("missing")); err == nil || err.Error() != "not found" {
		t.Fatalf("missing key: %v (raft needs the text \"not found\")", err)
	}
}

func FuzzDecodeLog(f *testing.F) {
	f.Add(encodeLog(&raft.Log{Term: 3, Type: raft.LogCommand, Data: []byte("abc")}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, v []byte) {
		var l raft.Log
		if err := decodeLog(1, v, &l); err != nil {
			if !errors.Is(err, ErrBadEntry) {
				t.Fatalf("error not marked: %v", err)
			}
			return
		}
		// Every field is copied verbatim, so a record that decodes
		// re-encodes to the same bytes.
		if !bytes.Equal(encodeLog(&l), v) {
			t.Fatalf("re-encoding differs: %x", v)
		}
	})
}
