package store

import (
	"context"
	"errors"
	"fmt"
)

// Limits every backend accepts. MaxKeySize fits a PostgreSQL B-tree entry
// with room to spare; MaxValueSize keeps one value well below what Redis and
// PostgreSQL move in one message.
const (
	MaxKeySize   = 2048
	MaxValueSize = 16 << 20
)

var (
	// ErrNotFound: the key is absent.
	ErrNotFound = errors.New("store: key not found")
	// ErrConflict: a transaction kept conflicting with concurrent ones and
	// the backend gave up retrying it. Nothing was written.
	ErrConflict = errors.New("store: transaction conflict, retries exhausted")
	// ErrClosed: the Store was closed.
	ErrClosed = errors.New("store: closed")
	// ErrTxDone: a Tx was used after its transaction function returned.
	ErrTxDone = errors.New("store: transaction already finished")
	// ErrInvalid: a key or value breaks the limits (empty or too long key,
	// too large value). Wrapped with the detail.
	ErrInvalid = errors.New("store: invalid argument")
	// ErrStopScan may be returned by a scan callback to end the scan early;
	// Scan then returns nil.
	ErrStopScan = errors.New("store: stop scan")
)

// ScanFunc receives one pair of a scan, in key order. k and v are valid only
// during the call. Returning ErrStopScan ends the scan without error; any
// other error ends it and is returned by Scan unchanged.
type ScanFunc func(k, v []byte) error

// Store is the filer's metadata store. See the package documentation for
// the contract every implementation keeps.
type Store interface {
	// Get returns a copy of the value stored at key, or ErrNotFound.
	Get(ctx context.Context, key []byte) ([]byte, error)
	// Scan calls fn for each pair with start <= key < end, in bytewise key
	// order, at most limit times (limit <= 0: no limit). A nil start means
	// from the first key, a nil end means to the last.
	Scan(ctx context.Context, start, end []byte, limit int, fn ScanFunc) error
	// View runs fn in a read-only transaction with a consistent view.
	View(ctx context.Context, fn func(tx ReadTx) error) error
	// Update runs fn in a serialisable read-write transaction and commits
	// it, retrying fn on conflicts; ErrConflict when retries run out.
	Update(ctx context.Context, fn func(tx Tx) error) error
	// Close releases the store after calls in flight have finished.
	Close() error
}

// ReadTx reads inside a transaction. Its methods have the meaning of the
// Store methods of the same name and use the transaction's context.
type ReadTx interface {
	Get(key []byte) ([]byte, error)
	Scan(start, end []byte, limit int, fn ScanFunc) error
}

// Tx is a read-write transaction. Reads see the transaction's own writes.
type Tx interface {
	ReadTx
	// Put sets key to val (overwriting any value).
	Put(key, val []byte) error
	// Delete removes key; deleting an absent key is not an error.
	Delete(key []byte) error
}

// CheckKey returns an error wrapping ErrInvalid unless key is a valid key.
// Backends call it so that all of them reject the same inputs.
func CheckKey(key []byte) error {
	if len(key) == 0 {
		return fmt.Errorf("%w: empty key", ErrInvalid)
	}
	if len(key) > MaxKeySize {
		return fmt.Errorf("%w: key of %d bytes exceeds %d", ErrInvalid, len(key), MaxKeySize)
	}
	return nil
}

// CheckValue returns an error wrapping ErrInvalid unless val is a valid value.
func CheckValue(val []byte) error {
	if len(val) > MaxValueSize {
		return fmt.Errorf("%w: value of %d bytes exceeds %d", ErrInvalid, len(val), MaxValueSize)
	}
	return nil
}

// PrefixEnd returns the smallest key greater than every key that starts
// with prefix, for use as the end of a prefix scan, or nil (no bound) when
// there is none (prefix empty or all 0xff bytes).
func PrefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// EmptyRange reports whether [start, end) can hold no key, so that backends
// can answer such scans without a round trip.
func EmptyRange(start, end []byte) bool {
	return end != nil && string(start) >= string(end)
}

type deferredKey struct{}

// WithDeferredDurability returns a context under which Update may answer
// once its transaction is committed and visible (atomic and serialised as
// always) but before it is durable; the backend makes it durable in the
// background within milliseconds. An Update without the flag (an empty one
// included) still returns only once its writes and every commit visible
// when it began are durable, so it waits for the deferred ones. Backends
// that cannot defer ignore the flag and commit durably.
func WithDeferredDurability(ctx context.Context) context.Context {
	return context.WithValue(ctx, deferredKey{}, true)
}

// DeferredDurability reports whether ctx carries WithDeferredDurability.
func DeferredDurability(ctx context.Context) bool {
	v, _ := ctx.Value(deferredKey{}).(bool)
	return v
}

type unhurriedKey struct{}

// WithUnhurriedDurability returns a context under which an Update still
// returns only once its writes and every commit visible when it began are
// durable, but does not hurry the background sync of deferred commits: it
// waits for it (milliseconds) instead of forcing one at once. For callers
// that must not act on a commit before it is durable but are in no hurry,
// such as the event stream, which would otherwise undo the sharing of
// deferred syncs by asking for one after every commit it reads. Backends
// that cannot defer ignore the flag.
func WithUnhurriedDurability(ctx context.Context) context.Context {
	return context.WithValue(ctx, unhurriedKey{}, true)
}

// UnhurriedDurability reports whether ctx carries WithUnhurriedDurability.
func UnhurriedDurability(ctx context.Context) bool {
	v, _ := ctx.Value(unhurriedKey{}).(bool)
	return v
}
