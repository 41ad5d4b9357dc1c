package needle

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/ttl"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func sampleMeta() Meta {
	return Meta{
		Key: 0x0102030405060708, Cookie: 0xdeadbeef, Flags: FlagGzip,
		Name: "photo.jpg", Mime: "image/jpeg", LastModified: 1700000000,
		TTL: ttl.TTL{Count: 3, Unit: 'd'}, Pairs: []byte(`{"a":"b"}`), AppendedAtNs: 1700000000123456789,
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s changed: the on-disk format must stay compatible\n got %x\nwant %x", name, got, want)
	}
}

func TestRecordGoldenAndRoundTrip(t *testing.T) {
	m := sampleMeta()
	data := []byte("hello, kelp")
	rec, err := AppendRecord(nil, &m, data)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "record_v1.bin", rec)
	body, _ := BodySize(&m, int64(len(data)))
	if int64(len(rec)) != RecordSize(body) || len(rec)%Align != 0 {
		t.Fatalf("record length %d, RecordSize %d", len(rec), RecordSize(body))
	}
	r, err := ParseRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Meta, m) || !bytes.Equal(r.Data, data) || r.DataCRC != CRC(data) {
		t.Fatalf("round trip: %+v %q", r.Meta, r.Data)
	}
	// Every single-bit flip in header+body+trailer is caught.
	for i := 0; i < int(HeaderSize+body+TrailerSize); i++ {
		bad := append([]byte(nil), rec...)
		bad[i] ^= 0x10
		if _, err := ParseRecord(bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flip at byte %d not detected: %v", i, err)
		}
	}
	if _, err := ParseRecord(rec[:len(rec)-9]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated record: %v", err)
	}
}

func TestTombstone(t *testing.T) {
	rec := AppendTombstone(nil, 42, 7)
	golden(t, "tombstone_v1.bin", rec)
	if int64(len(rec)) != RecordSize(0) || len(rec) != 24 {
		t.Fatalf("tombstone length %d", len(rec))
	}
	r, err := ParseRecord(rec)
	if err != nil || !r.Header.IsTombstone() || r.Meta.Key != 42 || r.Meta.Cookie != 7 {
		t.Fatalf("tombstone parse: %+v %v", r, err)
	}
}

func TestParseMetaNeedsMore(t *testing.T) {
	m := sampleMeta()
	rec, _ := AppendRecord(nil, &m, make([]byte, 100))
	_, _, _, _, need, err := ParseMeta(rec[:HeaderSize+MetaSize])
	if err != nil || need != HeaderSize+m.MetaLen() {
		t.Fatalf("need = %d, %v", need, err)
	}
	got, _, off, size, _, err := ParseMeta(rec[:need])
	if err != nil || got.Name != m.Name || off != need || size != 100 {
		t.Fatalf("ParseMeta = %+v %d %d %v", got, off, size, err)
	}
}

func TestLimits(t *testing.T) {
	m := Meta{Name: string(make([]byte, 256))}
	if _, err := AppendRecord(nil, &m, nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("long name: %v", err)
	}
	m = Meta{Pairs: make([]byte, MaxPairs+1)}
	if _, err := BodySize(&m, 0); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("long pairs: %v", err)
	}
	if _, err := BodySize(&Meta{}, MaxBodySize); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("huge data: %v", err)
	}
}

func TestIndexGolden(t *testing.T) {
	var b []byte
	entries := []IndexEntry{{Key: 1, Offset: 32, Size: 100}, {Key: 0xffffffffffffffff, Offset: MaxOffset, Size: TombstoneSize}}
	for _, e := range entries {
		b = AppendIndex(b, e)
	}
	golden(t, "index_v1.bin", b)
	for i, want := range entries {
		got, err := ParseIndex(b[i*IndexEntrySize:])
		if err != nil || got != want {
			t.Fatalf("entry %d = %+v %v", i, got, err)
		}
	}
	if !entries[1].IsTombstone() || entries[0].IsTombstone() {
		t.Fatal("IsTombstone")
	}
}

func TestSuperblockGolden(t *testing.T) {
	s := Superblock{Version: Version, Replication: replication.Code{DiffRack: 1}, TTL: ttl.TTL{Count: 5, Unit: 'w'}, CompactionRevision: 3, CreatedAtNs: 1700000000000000000}
	b := s.Marshal()
	golden(t, "superblock_v1.bin", b)
	got, err := ParseSuperblock(b)
	if err != nil || got != s {
		t.Fatalf("ParseSuperblock = %+v %v", got, err)
	}
	b[9] ^= 1
	if _, err := ParseSuperblock(b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt superblock: %v", err)
	}
}

func FuzzParseRecord(f *testing.F) {
	m := sampleMeta()
	rec, _ := AppendRecord(nil, &m, []byte("data"))
	f.Add(rec)
	f.Add(AppendTombstone(nil, 1, 2))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRecord(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not marked corrupt: %v", err)
			}
			return
		}
		// A record that parses re-encodes to the same bytes.
		var again []byte
		if r.Header.IsTombstone() {
			again = AppendTombstone(nil, r.Meta.Key, r.Meta.Cookie)
		} else if again, err = AppendRecord(nil, &r.Meta, r.Data); err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		n := HeaderSize + int(r.Header.BodySize) + TrailerSize
		if !bytes.Equal(again[:n], b[:n]) {
			t.Fatalf("re-encoding differs:\n%x\n%x", again[:n], b[:n])
		}
	})
}

func FuzzParseIndex(f *testing.F) {
	f.Add(AppendIndex(nil, IndexEntry{Key: 5, Offset: 64, Size: 10}))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseIndex(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatal(err)
			}
			return
		}
		if got := AppendIndex(nil, e); !bytes.Equal(got, b[:IndexEntrySize]) {
			t.Fatalf("round trip %x -> %x", b[:IndexEntrySize], got)
		}
	})
}

func FuzzParseSuperblock(f *testing.F) {
	f.Add(Superblock{Version: Version}.Marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSuperblock(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatal(err)
			}
			return
		}
		if _, err := ParseSuperblock(s.Marshal()); err != nil {
			t.Fatal(err)
		}
	})
}
