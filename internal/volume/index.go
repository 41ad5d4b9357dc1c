package volume

import (
	"slices"
	"sort"
)

// segCap is the number of entries per index segment. Segments are allocated
// at exactly this capacity so append never doubles a slice (which would waste
// up to half the memory); a segment closed early is shrunk to fit.
const segCap = 4096

// indexEntry is an index value: offset in 8-byte units and body size
// (needle.TombstoneSize for a delete).
type indexEntry struct {
	off  uint32
	size uint32
}

// segment holds keys base+delta for sorted, distinct uint16 deltas: 10 bytes
// per needle.
type segment struct {
	base   uint64
	deltas []uint16
	offs   []uint32
	sizes  []uint32
}

func (s *segment) find(key uint64) (int, bool) {
	if key < s.base || key-s.base > 0xffff {
		return 0, false
	}
	d := uint16(key - s.base)
	i, ok := slices.BinarySearch(s.deltas, d)
	return i, ok
}

func (s *segment) shrink() {
	if cap(s.deltas) == len(s.deltas) {
		return
	}
	s.deltas = slices.Clip(append([]uint16(nil), s.deltas...))
	s.offs = slices.Clip(append([]uint32(nil), s.offs...))
	s.sizes = slices.Clip(append([]uint32(nil), s.sizes...))
}

// needleIndex maps needle keys to index entries. Keys mostly arrive in
// increasing order (the master hands out a sequence), so they are appended to
// sorted segments; a key lower than the highest seen that is not already in a
// segment goes to a small overflow map, which is merged into the segments when
// it grows. Not safe for concurrent use: the volume's mutex guards it.
type needleIndex struct {
	segs     []*segment
	overflow map[uint64]indexEntry
	n        int // distinct keys
}

func newNeedleIndex() *needleIndex { return &needleIndex{overflow: map[uint64]indexEntry{}} }

func (x *needleIndex) len() int { return x.n }

// segFor returns the segment that could hold key, or nil.
func (x *needleIndex) segFor(key uint64) *segment {
	i := sort.Search(len(x.segs), func(i int) bool { return x.segs[i].base > key })
	if i == 0 {
		return nil
	}
	return x.segs[i-1]
}

func (x *needleIndex) lastKey() (uint64, bool) {
	if len(x.segs) == 0 {
		return 0, false
	}
	s := x.segs[len(x.segs)-1]
	return s.base + uint64(s.deltas[len(s.deltas)-1]), true
}

func (x *needleIndex) get(key uint64) (indexEntry, bool) {
	if s := x.segFor(key); s != nil {
		if i, ok := s.find(key); ok {
			return indexEntry{s.offs[i], s.sizes[i]}, true
		}
	}
	e, ok := x.overflow[key]
	return e, ok
}

// set inserts or replaces key's entry and returns the previous one.
func (x *needleIndex) set(key uint64, e indexEntry) (old indexEntry, existed bool) {
	last, any := x.lastKey()
	if !any || key > last {
		x.appendKey(key, e)
		x.n++
		return indexEntry{}, false
	}
	if s := x.segFor(key); s != nil {
		if i, ok := s.find(key); ok {
			old = indexEntry{s.offs[i], s.sizes[i]}
			s.offs[i], s.sizes[i] = e.off, e.size
			return old, true
		}
	}
	old, existed = x.overflow[key]
	x.overflow[key] = e
	if !existed {
		x.n++
		if len(x.overflow) > 1024 && len(x.overflow) > x.n/16 {
			x.compact()
		}
	}
	return old, existed
}

func (x *needleIndex) appendKey(key uint64, e indexEntry) {
	if k := len(x.segs); k > 0 {
		s := x.segs[k-1]
		if len(s.deltas) < segCap && key-s.base <= 0xffff {
			s.deltas = append(s.deltas, uint16(key-s.base))
			s.offs = append(s.offs, e.off)
			s.sizes = append(s.sizes, e.size)
			return
		}
		s.shrink()
	}
	s := &segment{
		base:   key,
		deltas: make([]uint16, 1, segCap),
		offs:   make([]uint32, 1, segCap),
		sizes:  make([]uint32, 1, segCap),
	}
	s.offs[0], s.sizes[0] = e.off, e.size
	x.segs = append(x.segs, s)
}

// ascend calls fn for every key in increasing order until fn returns false.
func (x *needleIndex) ascend(fn func(key uint64, e indexEntry) bool) {
	extra := make([]uint64, 0, len(x.overflow))
	for k := range x.overflow {
		extra = append(extra, k)
	}
	slices.Sort(extra)
	j := 0
	for _, s := range x.segs {
		for i, d := range s.deltas {
			k := s.base + uint64(d)
			for ; j < len(extra) && extra[j] < k; j++ {
				if !fn(extra[j], x.overflow[extra[j]]) {
					return
				}
			}
			if !fn(k, indexEntry{s.offs[i], s.sizes[i]}) {
				return
			}
		}
	}
	for ; j < len(extra); j++ {
		if !fn(extra[j], x.overflow[extra[j]]) {
			return
		}
	}
}

// compact merges the overflow map into fresh segments.
func (x *needleIndex) compact() {
	fresh := newNeedleIndex()
	x.ascend(func(k uint64, e indexEntry) bool {
		fresh.appendKey(k, e)
		return true
	})
	if k := len(fresh.segs); k > 0 {
		fresh.segs[k-1].shrink()
	}
	x.segs, x.overflow = fresh.segs, fresh.overflow
}
