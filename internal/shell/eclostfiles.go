package shell

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"google.golang.org/grpc"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// Naming the files an EC volume with fewer than k shards has lost.
// Volume servers know needle keys only; a filer knows which files use
// which needles, but has no index from file id to path. ec.rebuild
// -filer=host:port therefore walks the filer's whole tree (directories
// page by page, each file's chunk list) looking for chunks on the lost
// needles: a slow scan, acceptable on this rare error path, and bounded
// by -filerScanLimit entries. A file of thousands of chunks lists manifest
// chunks (blobs holding chunk lists): the walk names the file when a
// manifest's own needle is lost, and otherwise reads the manifest from the
// cluster and looks at the chunks it lists (manifests inside manifests
// too, to chunk's own depth bound). A manifest that cannot be read names
// its file as possibly lost, with the reason.

// entryLister is the part of the filer's gRPC API the walk uses.
type entryLister interface {
	ListEntries(ctx context.Context, in *filerpb.ListEntriesRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[filerpb.ListEntriesResponse], error)
}

// maxManifestDepth bounds how deep the walk follows manifests within
// manifests (the filer makes one level; corrupt data must not loop).
const maxManifestDepth = 4

// lostFiles walks the filer tree from "/" and returns, per volume of lost
// (volume -> lost needle keys), the paths of the files with a chunk on a
// lost needle, sorted; manifests are read through blobs. unsure names the
// files whose manifest could not be read (path -> why). walked is the
// number of entries seen; complete is false when the walk stopped at limit
// entries.
func lostFiles(ctx context.Context, fc entryLister, blobs chunk.Opener, lost map[uint32]map[uint64]bool, limit int) (paths map[uint32][]string, unsure map[string]error, walked int, complete bool, err error) {
	paths = map[uint32][]string{}
	unsure = map[string]error{}
	// onLost returns the volume of the first lost needle the chunks use.
	var onLost func(cs []chunk.Chunk, depth int) (uint32, bool, error)
	onLost = func(cs []chunk.Chunk, depth int) (uint32, bool, error) {
		for _, c := range cs {
			if id, err := fid.Parse(c.FID); err == nil && lost[id.Volume][id.Key] {
				return id.Volume, true, nil
			}
		}
		for _, c := range cs {
			if !c.Manifest {
				continue
			}
			if depth >= maxManifestDepth {
				return 0, false, fmt.Errorf("manifest %s: manifests nested deeper than %d", c.FID, maxManifestDepth)
			}
			inner, err := chunk.ReadManifest(ctx, blobs, c)
			if err != nil {
				return 0, false, err
			}
			if v, ok, err := onLost(inner, depth+1); ok || err != nil {
				return v, ok, err
			}
		}
		return 0, false, nil
	}
	dirs := []string{"/"}
	for len(dirs) > 0 {
		dir := dirs[len(dirs)-1]
		dirs = dirs[:len(dirs)-1]
		after := ""
		for {
			stream, err := fc.ListEntries(ctx, &filerpb.ListEntriesRequest{Dir: dir, StartAfter: after, Limit: 1000})
			if err != nil {
				return nil, nil, walked, false, fmt.Errorf("list %s: %w", dir, err)
			}
			more := false
			for {
				resp, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return nil, nil, walked, false, fmt.Errorf("list %s: %w", dir, err)
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
				cs := make([]chunk.Chunk, 0, len(e.GetChunks()))
				for _, c := range e.GetChunks() {
					cs = append(cs, chunk.Chunk{FID: c.GetFid(), Offset: c.GetOffset(), Size: c.GetSize(),
						Manifest: c.GetManifest(), CipherKey: chunk.KeyOf(c.GetCipherKey())})
				}
				if v, ok, err := onLost(cs, 0); ok {
					paths[v] = append(paths[v], p)
				} else if err != nil {
					unsure[p] = err
				}
				if walked >= limit {
					sortPaths(paths)
					return paths, unsure, walked, false, nil
				}
			}
			if !more {
				break
			}
		}
	}
	sortPaths(paths)
	return paths, unsure, walked, true, nil
}

func sortPaths(m map[uint32][]string) {
	for v, p := range m {
		slices.Sort(p)
		m[v] = slices.Compact(p)
	}
}

// clusterBlobs reads blobs (manifests) through the cluster client.
type clusterBlobs struct{ c *client.Client }

func (b clusterBlobs) Open(ctx context.Context, s string, off, n int64) (io.ReadCloser, error) {
	id, err := fid.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("chunk %q: %w", s, err)
	}
	var rng *client.Range
	if off > 0 || n >= 0 {
		if n == 0 {
			return io.NopCloser(strings.NewReader("")), nil
		}
		rng = &client.Range{Offset: off, Length: max(n, 0)}
	}
	body, _, err := b.c.Get(ctx, id, rng)
	return body, err
}
