package shell

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"

	"google.golang.org/grpc"

	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// Naming the files an EC volume with fewer than k shards has lost.
// Volume servers know needle keys only; a filer knows which files use
// which needles, but has no index from file id to path. ec.rebuild
// -filer=host:port therefore walks the filer's whole tree (directories
// page by page, each file's chunk list) looking for chunks on the lost
// needles: a slow scan, acceptable on this rare error path, and bounded
// by -filerScanLimit entries. Chunks listed inside a manifest chunk are not
// opened: a file whose manifest is lost is named, one whose manifest
// survives but points at lost chunks is not (manifests are used for files
// of thousands of chunks).

// entryLister is the part of the filer's gRPC API the walk uses.
type entryLister interface {
	ListEntries(ctx context.Context, in *filerpb.ListEntriesRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[filerpb.ListEntriesResponse], error)
}

// lostFiles walks the filer tree from "/" and returns, per volume of lost
// (volume -> lost needle keys), the paths of the files with a chunk on a
// lost needle, sorted. walked is the number of entries seen; complete is
// false when the walk stopped at limit entries.
func lostFiles(ctx context.Context, fc entryLister, lost map[uint32]map[uint64]bool, limit int) (paths map[uint32][]string, walked int, complete bool, err error) {
	paths = map[uint32][]string{}
	dirs := []string{"/"}
	for len(dirs) > 0 {
		dir := dirs[len(dirs)-1]
		dirs = dirs[:len(dirs)-1]
		after := ""
		for {
			stream, err := fc.ListEntries(ctx, &filerpb.ListEntriesRequest{Dir: dir, StartAfter: after, Limit: 1000})
			if err != nil {
				return nil, walked, false, fmt.Errorf("list %s: %w", dir, err)
			}
			more := false
			for {
				resp, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return nil, walked, false, fmt.Errorf("list %s: %w", dir, err)
				}
				e := resp.GetEntry()
				if e == nil {
					continue
				}
				walked++
				more = resp.GetMore()
				p := e.GetPath()
				if p == "" || !path.IsAbs(p) {
					p = path.Join(dir, p)
				}
				after = path.Base(p)
				if e.GetIsDir() {
					dirs = append(dirs, p)
				}
				for _, c := range e.GetChunks() {
					id, err := fid.Parse(c.GetFid())
					if err != nil {
						continue
					}
					if lost[id.Volume][id.Key] {
						paths[id.Volume] = append(paths[id.Volume], p)
						break
					}
				}
				if walked >= limit {
					sortPaths(paths)
					return paths, walked, false, nil
				}
			}
			if !more {
				break
			}
		}
	}
	sortPaths(paths)
	return paths, walked, true, nil
}

func sortPaths(m map[uint32][]string) {
	for v, p := range m {
		slices.Sort(p)
		m[v] = slices.Compact(p)
	}
}
