package chunk

import (
	"slices"
	"sort"
)

// Interval is a range [Start, Stop) of a file whose bytes come from one
// blob, starting ChunkOffset bytes into it.
type Interval struct {
	Start, Stop int64
	FID         string
	ChunkOffset int64
	CipherKey   []byte // the blob's key, nil when stored in the clear
	ChunkSize   int64  // the blob's plaintext size (the chunk's Size)
}

// Visible resolves chunks (manifests already expanded by Resolve; any left
// are ignored) into sorted, non-overlapping intervals: where chunks overlap,
// the one later in the list wins. Ranges no chunk covers are absent.
//
// Appending past the current end, the common case, costs O(1) per chunk;
// an overlapping chunk costs a binary search and a slice splice.
func Visible(chunks []Chunk) []Interval {
	var vis []Interval
	for _, c := range chunks {
		if c.Manifest || c.Size <= 0 {
			continue
		}
		iv := Interval{Start: c.Offset, Stop: c.End(), FID: c.FID, CipherKey: c.CipherKey, ChunkSize: c.Size}
		if len(vis) == 0 || vis[len(vis)-1].Stop <= iv.Start {
			vis = append(vis, iv)
			continue
		}
		// i: first interval ending after the new one starts; j: first
		// interval starting at or after the new one ends.
		i := sort.Search(len(vis), func(k int) bool { return vis[k].Stop > iv.Start })
		j := sort.Search(len(vis), func(k int) bool { return vis[k].Start >= iv.Stop })
		repl := make([]Interval, 0, 3)
		if i < j && vis[i].Start < iv.Start {
			left := vis[i]
			left.Stop = iv.Start
			repl = append(repl, left)
		}
		repl = append(repl, iv)
		if i < j && vis[j-1].Stop > iv.Stop {
			right := vis[j-1]
			right.ChunkOffset += iv.Stop - right.Start
			right.Start = iv.Stop
			repl = append(repl, right)
		}
		vis = slices.Replace(vis, i, j, repl...)
	}
	return vis
}

// View is one piece of a read: Size bytes at file position FileOffset,
// taken from blob FID at ChunkOffset, or zeros when FID is empty (a hole).
type View struct {
	FileOffset  int64
	Size        int64
	FID         string
	ChunkOffset int64
	CipherKey   []byte // as Interval
	ChunkSize   int64
}

// Views plans a read of [off, off+n) of a file of the given size over
// intervals from Visible: consecutive views that together cover exactly
// the part of the range inside the file, holes included.
func Views(vis []Interval, size, off, n int64) []View {
	end := min(off+n, size)
	if off < 0 || off >= end {
		return nil
	}
	var out []View
	pos := off
	i := sort.Search(len(vis), func(k int) bool { return vis[k].Stop > off })
	for pos < end {
		if i >= len(vis) || vis[i].Start >= end {
			out = append(out, View{FileOffset: pos, Size: end - pos})
			break
		}
		iv := vis[i]
		if iv.Start > pos {
			out = append(out, View{FileOffset: pos, Size: iv.Start - pos})
			pos = iv.Start
		}
		stop := min(iv.Stop, end)
		out = append(out, View{FileOffset: pos, Size: stop - pos, FID: iv.FID, ChunkOffset: iv.ChunkOffset + pos - iv.Start, CipherKey: iv.CipherKey, ChunkSize: iv.ChunkSize})
		pos = stop
		i++
	}
	return out
}

// Hidden returns the chunks of cs (not manifests) that contribute no
// visible byte: a newer chunk covers all of them, so they can be dropped
// from the list and their blobs deleted.
func Hidden(cs []Chunk) []Chunk {
	used := make(map[string]bool)
	for _, iv := range Visible(cs) {
		used[iv.FID] = true
	}
	var out []Chunk
	for _, c := range cs {
		if !c.Manifest && !used[c.FID] {
			out = append(out, c)
		}
	}
	return out
}
