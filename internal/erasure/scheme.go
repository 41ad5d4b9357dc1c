package erasure

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Errors returned (wrapped) by this package.
var (
	ErrBadScheme = errors.New("erasure: bad scheme")
	ErrCorrupt   = errors.New("erasure: corrupt")
	// ErrTooFewShards: fewer than k shards could be read; the data is lost
	// (or its holders are down).
	ErrTooFewShards = errors.New("erasure: too few shards")
	// ErrShardUnavailable is what a fetch returns for a shard it cannot read
	// (not held, holder down); the reader reconstructs around it.
	ErrShardUnavailable = errors.New("erasure: shard unavailable")
	// ErrRange: a read outside a shard, or a verified read not made of whole blocks.
	ErrRange = errors.New("erasure: bad shard range")
	// ErrSealed: the EC volume takes no more deletes, its journal was
	// handed to the volume decoded from it (Volume.Seal); a delete goes to
	// that volume instead.
	ErrSealed = errors.New("erasure: EC volume replaced by its decoded volume")
)

// MaxShards bounds k+m; a shard set fits in a uint32 bit mask.
const MaxShards = 32

// Scheme is a Reed–Solomon code: Data data shards and Parity parity shards.
// Any Data of the Data+Parity shards rebuild the rest.
type Scheme struct {
	Data   int
	Parity int
}

// DefaultScheme is 10+4: 1.4× the data, survives any 4 lost shards.
var DefaultScheme = Scheme{Data: 10, Parity: 4}

// Total is k+m.
func (s Scheme) Total() int { return s.Data + s.Parity }

func (s Scheme) String() string { return fmt.Sprintf("%d+%d", s.Data, s.Parity) }

// Validate reports whether the scheme can be used.
func (s Scheme) Validate() error {
	if s.Data < 1 || s.Parity < 1 || s.Total() > MaxShards {
		return fmt.Errorf("%w: %d+%d (want k>=1, m>=1, k+m<=%d)", ErrBadScheme, s.Data, s.Parity, MaxShards)
	}
	return nil
}

// ParseScheme parses "k+m", e.g. "10+4" or "6+3".
func ParseScheme(text string) (Scheme, error) {
	ks, ms, ok := strings.Cut(strings.TrimSpace(text), "+")
	if !ok {
		return Scheme{}, fmt.Errorf("%w: %q is not k+m", ErrBadScheme, text)
	}
	k, err1 := strconv.Atoi(ks)
	m, err2 := strconv.Atoi(ms)
	if err1 != nil || err2 != nil {
		return Scheme{}, fmt.Errorf("%w: %q is not k+m", ErrBadScheme, text)
	}
	s := Scheme{Data: k, Parity: m}
	return s, s.Validate()
}

// ShardSet is a set of shard indexes as a bit mask (bit i = shard i).
type ShardSet uint32

// Has reports whether shard i is in the set.
func (s ShardSet) Has(i int) bool { return i >= 0 && i < MaxShards && s&(1<<i) != 0 }

// With returns the set plus shard i.
func (s ShardSet) With(i int) ShardSet { return s | 1<<i }

// Without returns the set minus shard i.
func (s ShardSet) Without(i int) ShardSet { return s &^ (1 << i) }

// Count is the number of shards in the set.
func (s ShardSet) Count() int {
	n := 0
	for i := range MaxShards {
		if s.Has(i) {
			n++
		}
	}
	return n
}

// List returns the shard indexes in ascending order.
func (s ShardSet) List() []int {
	var out []int
	for i := range MaxShards {
		if s.Has(i) {
			out = append(out, i)
		}
	}
	return out
}

// SetOf builds a set from indexes.
func SetOf(ids ...int) ShardSet {
	var s ShardSet
	for _, i := range ids {
		s = s.With(i)
	}
	return s
}

// String lists the shards, e.g. "0,3,7".
func (s ShardSet) String() string {
	parts := make([]string, 0, MaxShards)
	for _, i := range s.List() {
		parts = append(parts, strconv.Itoa(i))
	}
	return strings.Join(parts, ",")
}
