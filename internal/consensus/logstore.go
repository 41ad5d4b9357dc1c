package consensus

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// logStore is raft's LogStore and StableStore in one bbolt file. Kelp keeps
// its own instead of raft-boltdb v1 because that one is built on the
// unmaintained boltdb/bolt, which trips Go's pointer checks under -race.
//
// Format (version 1), file raft.db:
//
//	bucket "logs":   key = index (8 bytes big-endian), value = encodeLog
//	bucket "stable": raft's own keys and values, uint64s big-endian
//
// encodeLog: version byte 1, term u64, type u8, appendedAt unix nanos i64,
// data length u32 + data, extensions length u32 + extensions (little-endian).
type logStore struct {
	db *bolt.DB
}

var (
	bucketLogs   = []byte("logs")
	bucketStable = []byte("stable")
	// errKeyNotFound must read exactly "not found": raft compares the text.
	errKeyNotFound = errors.New("not found")
)

const logRecordVersion = 1

func openLogStore(path string) (*logStore, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("consensus: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketLogs, bucketStable} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("consensus: init %s: %w", path, err)
	}
	return &logStore{db: db}, nil
}

func (s *logStore) Close() error { return s.db.Close() }

func indexKey(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }

func (s *logStore) FirstIndex() (uint64, error) { return s.edgeIndex(true) }
func (s *logStore) LastIndex() (uint64, error)  { return s.edgeIndex(false) }

func (s *logStore) edgeIndex(first bool) (uint64, error) {
	var idx uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketLogs).Cursor()
		k, _ := c.Last()
		if first {
			k, _ = c.First()
		}
		if k != nil {
			idx = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return idx, err
}

func (s *logStore) GetLog(index uint64, l *raft.Log) error {
	return s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketLogs).Get(indexKey(index))
		if v == nil {
			return raft.ErrLogNotFound
		}
		return decodeLog(index, v, l)
	})
}

func (s *logStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func (s *logStore) StoreLogs(logs []*raft.Log) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLogs)
		for _, l := range logs {
			if err := b.Put(indexKey(l.Index), encodeLog(l)); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *logStore) DeleteRange(lo, hi uint64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketLogs).Cursor()
		for k, _ := c.Seek(indexKey(lo)); k != nil && binary.BigEndian.Uint64(k) <= hi; k, _ = c.Next() {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *logStore) Set(key, val []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketStable).Put(key, val) })
}

func (s *logStore) Get(key []byte) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketStable).Get(key)
		if v == nil {
			return errKeyNotFound
		}
		out = append([]byte(nil), v...)
		return nil
	})
	return out, err
}

func (s *logStore) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

func (s *logStore) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: stable key %q has %d bytes", ErrBadEntry, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func encodeLog(l *raft.Log) []byte {
	b := make([]byte, 0, 1+8+1+8+4+len(l.Data)+4+len(l.Extensions))
	b = append(b, logRecordVersion)
	b = binary.LittleEndian.AppendUint64(b, l.Term)
	b = append(b, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(at))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(l.Data)))
	b = append(b, l.Data...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(l.Extensions)))
	return append(b, l.Extensions...)
}

// decodeLog copies everything out of v: bolt's memory is only valid inside
// the transaction.
func decodeLog(index uint64, v []byte, l *raft.Log) error {
	bad := func(what string) error { return fmt.Errorf("%w: raft log %d: %s", ErrBadEntry, index, what) }
	if len(v) < 1+8+1+8+4 || v[0] != logRecordVersion {
		return bad("bad header")
	}
	l.Index = index
	l.Term = binary.LittleEndian.Uint64(v[1:])
	l.Type = raft.LogType(v[9])
	l.AppendedAt = time.Time{}
	if at := int64(binary.LittleEndian.Uint64(v[10:])); at != 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	rest := v[18:]
	n := binary.LittleEndian.Uint32(rest)
	rest = rest[4:]
	if uint64(len(rest)) < uint64(n)+4 {
		return bad("short data")
	}
	l.Data = append([]byte(nil), rest[:n]...)
	rest = rest[n:]
	m := binary.LittleEndian.Uint32(rest)
	rest = rest[4:]
	if uint64(len(rest)) != uint64(m) {
		return bad("bad extensions length")
	}
	l.Extensions = append([]byte(nil), rest...)
	return nil
}
