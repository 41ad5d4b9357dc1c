package store

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// NextSeq increments the counter stored at key (8 bytes, big-endian; absent
// means 0) and returns its new value, the first being 1. Call it inside the
// Update that writes the record the number is for: the transaction's
// serialisability makes numbers unique, ordered and gap-free across every
// process sharing the store.
func NextSeq(tx Tx, key []byte) (uint64, error) {
	var n uint64
	v, err := tx.Get(key)
	switch {
	case err == nil:
		if len(v) != 8 {
			return 0, fmt.Errorf("store: sequence %q holds %d bytes, want 8", key, len(v))
		}
		n = binary.BigEndian.Uint64(v)
	case !errors.Is(err, ErrNotFound):
		return 0, err
	}
	n++
	if err := tx.Put(key, binary.BigEndian.AppendUint64(nil, n)); err != nil {
		return 0, err
	}
	return n, nil
}

// SeqKey returns prefix followed by seq as 8 big-endian bytes, so that
// records keyed by it scan in sequence order.
func SeqKey(prefix []byte, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), seq)
}

// SeqOf returns the sequence number at the end of a key made by SeqKey.
func SeqOf(key []byte) (uint64, error) {
	if len(key) < 8 {
		return 0, fmt.Errorf("%w: key of %d bytes holds no sequence number", ErrInvalid, len(key))
	}
	return binary.BigEndian.Uint64(key[len(key)-8:]), nil
}
