package topology

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Divergent copies: the copies of a volume are meant to hold the same
// needles, but a replicated write that failed on some copies and was not
// acknowledged may still have landed on others, so copies can differ. The
// heartbeats show it as different live file counts or live bytes (size
// minus garbage, which a vacuum of one copy does not change). Nothing here
// repairs them; volume.fix.replication reports them so that an operator
// knows which volumes to check (a later reconciler brings them together).

// CopyState is what one copy of a volume reports.
type CopyState struct {
	URL        string
	FileCount  uint64 // live needles
	LiveBytes  uint64 // size minus deleted bytes
	ReadOnly   bool
	ModifiedAt time.Time
}

// DivergenceKind says how settled a divergence is.
type DivergenceKind uint8

const (
	// DivergenceSealed: every copy is read-only, so the copies will not
	// change by themselves; they differ until reconciled.
	DivergenceSealed DivergenceKind = iota + 1
	// DivergenceActive: a copy is writable and was written recently; the
	// counts may be taken mid-write (a copy catching up). Look again.
	DivergenceActive
	// DivergenceWritable: a copy is writable but none was written recently:
	// the copies differ for real.
	DivergenceWritable
)

func (k DivergenceKind) String() string {
	switch k {
	case DivergenceSealed:
		return "sealed"
	case DivergenceActive:
		return "active"
	case DivergenceWritable:
		return "writable"
	}
	return "unknown"
}

// Divergence is a volume whose copies disagree.
type Divergence struct {
	VolumeID   uint32
	Collection string
	Kind       DivergenceKind
	Copies     []CopyState // sorted by URL
}

func (d Divergence) String() string {
	var parts []string
	for _, c := range d.Copies {
		state := "writable"
		if c.ReadOnly {
			state = "read-only"
		}
		parts = append(parts, fmt.Sprintf("%s: %d files, %d live bytes, %s", c.URL, c.FileCount, c.LiveBytes, state))
	}
	var why string
	switch d.Kind {
	case DivergenceSealed:
		why = "all copies read-only: they stay different until reconciled"
	case DivergenceActive:
		why = "written in the last moments: a copy may still be catching up; look again"
	default:
		why = "writable but quiet: the copies differ for real"
	}
	return fmt.Sprintf("volume %d: copies differ (%s): %s", d.VolumeID, why, strings.Join(parts, "; "))
}

// FindDivergentCopies returns the volumes whose copies report different live
// file counts or live bytes, in id order. A copy modified less than recent
// before now makes the divergence DivergenceActive.
func FindDivergentCopies(nodes []NodeInfo, now time.Time, recent time.Duration) []Divergence {
	byID := map[uint32]*Divergence{}
	for _, n := range nodes {
		for _, d := range n.Disks {
			for _, v := range d.Volumes {
				e := byID[v.ID]
				if e == nil {
					e = &Divergence{VolumeID: v.ID, Collection: v.Collection}
					byID[v.ID] = e
				}
				e.Copies = append(e.Copies, CopyState{
					URL: n.URL, FileCount: v.FileCount, LiveBytes: v.Size - min(v.DeletedBytes, v.Size),
					ReadOnly: v.ReadOnly, ModifiedAt: v.ModifiedAt,
				})
			}
		}
	}
	var out []Divergence
	for _, e := range byID {
		if !copiesDiffer(e.Copies) {
			continue
		}
		slices.SortFunc(e.Copies, func(a, b CopyState) int { return cmp.Compare(a.URL, b.URL) })
		e.Kind = DivergenceSealed
		for _, c := range e.Copies {
			if c.ReadOnly {
				continue
			}
			if e.Kind == DivergenceSealed {
				e.Kind = DivergenceWritable
			}
			if !c.ModifiedAt.IsZero() && now.Sub(c.ModifiedAt) < recent {
				e.Kind = DivergenceActive
			}
		}
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b Divergence) int { return cmp.Compare(a.VolumeID, b.VolumeID) })
	return out
}

func copiesDiffer(cs []CopyState) bool {
	for _, c := range cs[1:] {
		if c.FileCount != cs[0].FileCount || c.LiveBytes != cs[0].LiveBytes {
			return true
		}
	}
	return false
}
