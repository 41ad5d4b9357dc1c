package shell

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/chunk/chunktest"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
	"github.com/kelpfs/kelp/internal/testcluster"
	"github.com/kelpfs/kelp/internal/testutil"
)

// fakeTree is a filer tree for lostFiles: directory -> entries in name
// order, served in pages of pageSize like the filer's ListEntries.
type fakeTree struct {
	dirs     map[string][]*filerpb.Entry
	pageSize int
	calls    int
}

type fakeStream struct {
	grpc.ClientStream
	out []*filerpb.ListEntriesResponse
}

func (f *fakeStream) Recv() (*filerpb.ListEntriesResponse, error) {
	if len(f.out) == 0 {
		return nil, io.EOF
	}
	r := f.out[0]
	f.out = f.out[1:]
	return r, nil
}

func (t *fakeTree) ListEntries(ctx context.Context, in *filerpb.ListEntriesRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[filerpb.ListEntriesResponse], error) {
	t.calls++
	var page []*filerpb.ListEntriesResponse
	all := t.dirs[in.Dir]
	i := 0
	for i < len(all) && in.StartAfter != "" && path.Base(all[i].Path) <= in.StartAfter {
		i++
	}
	for ; i < len(all) && len(page) < t.pageSize; i++ {
		page = append(page, &filerpb.ListEntriesResponse{Entry: all[i]})
	}
	if len(page) > 0 && i < len(all) {
		page[len(page)-1].More = true
	}
	return &fakeStream{out: page}, nil
}

func file(p string, fids ...string) *filerpb.Entry {
	e := &filerpb.Entry{Path: p}
	for _, f := range fids {
		e.Chunks = append(e.Chunks, &filerpb.Chunk{Fid: f})
	}
	return e
}

// TestLostFiles: the walk names exactly the files with a chunk on a lost
// needle, in every directory and across pages, and stops at its limit.
func TestLostFiles(t *testing.T) {
	tree := &fakeTree{pageSize: 2, dirs: map[string][]*filerpb.Entry{
		"/":  {{Path: "/a", IsDir: true}, file("/b", "7,0100000001"), file("/c", "3,0200000002"), {Path: "/d", IsDir: true}},
		"/a": {file("/a/x", "3,0500000005", "7,0300000003"), file("/a/y", "7,0400000004"), file("/a/z", "bad fid")},
		"/d": {file("/d/w", "7,0600000006", "7,0600000007")},
	}}
	lost := map[uint32]map[uint64]bool{7: {3: true, 6: true, 9: true}, 3: {2: true}}
	paths, _, walked, complete, err := lostFiles(context.Background(), tree, chunktest.New(), lost, 100)
	if err != nil || !complete || walked != 8 {
		t.Fatalf("walk: %v, complete %v, %d entries", err, complete, walked)
	}
	if got := paths[7]; !slices.Equal(got, []string{"/a/x", "/d/w"}) {
		t.Fatalf("volume 7: %v", got)
	}
	if got := paths[3]; !slices.Equal(got, []string{"/c"}) {
		t.Fatalf("volume 3: %v", got)
	}
	_, _, walked, complete, err = lostFiles(context.Background(), tree, chunktest.New(), lost, 3)
	if err != nil || complete || walked != 3 {
		t.Fatalf("bounded walk: %v, complete %v, %d entries", err, complete, walked)
	}
}

// TestLostFilesOpensManifests: a file of many chunks lists manifest
// chunks; the walk names it when a chunk behind a surviving manifest is on
// a lost needle (two levels of manifests), not only when the manifest
// itself is lost; a file whose manifests list no lost chunk is not named,
// and one whose manifest cannot be read is named as unsure, with why.
func TestLostFilesOpensManifests(t *testing.T) {
	ctx := context.Background()
	blobs := chunktest.New() // manifests land on volume 1
	plain := func(keys ...uint64) []chunk.Chunk {
		var cs []chunk.Chunk
		for i, k := range keys {
			cs = append(cs, chunk.Chunk{FID: fmt.Sprintf("7,%x%08x", k, 1), Offset: int64(i) * 10, Size: 10})
		}
		return cs
	}
	packed := func(cs []chunk.Chunk) []*filerpb.Chunk {
		ms, err := chunk.Pack(ctx, blobs, cs, 2, 3)
		if err != nil {
			t.Fatal(err)
		}
		var out []*filerpb.Chunk
		for _, c := range ms {
			out = append(out, &filerpb.Chunk{Fid: c.FID, Offset: c.Offset, Size: c.Size, Manifest: c.Manifest, CipherKey: c.CipherKey})
		}
		return out
	}
	hit := packed(plain(1, 2, 3, 4, 5, 6)) // key 5 is lost, behind the second manifest
	clean := packed(plain(11, 12, 13, 14, 15, 16))
	// A manifest of manifests: pack the manifests of a file again.
	var inner []chunk.Chunk
	for _, c := range packed(plain(21, 22, 23, 24, 25, 26, 27, 28, 9)) {
		inner = append(inner, chunk.Chunk{FID: c.Fid, Offset: c.Offset, Size: c.Size, Manifest: c.Manifest})
	}
	m2, err := chunk.Pack(ctx, blobs, append(inner, plain(31)...), 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	var nested []*filerpb.Chunk
	for _, c := range m2 {
		nested = append(nested, &filerpb.Chunk{Fid: c.FID, Offset: c.Offset, Size: c.Size, Manifest: c.Manifest})
	}
	if !slices.ContainsFunc(nested, func(c *filerpb.Chunk) bool { return c.Manifest }) {
		t.Fatal("no manifest of manifests made")
	}
	missing := []*filerpb.Chunk{{Fid: "1,ff00000001", Manifest: true, Size: 10}}
	tree := &fakeTree{pageSize: 10, dirs: map[string][]*filerpb.Entry{
		"/": {{Path: "/big", Chunks: hit}, {Path: "/clean", Chunks: clean}, {Path: "/gone", Chunks: missing}, {Path: "/nested", Chunks: nested}},
	}}
	lost := map[uint32]map[uint64]bool{7: {5: true, 9: true}}
	paths, unsure, _, complete, err := lostFiles(ctx, tree, blobs, lost, 100)
	if err != nil || !complete {
		t.Fatalf("walk: %v, complete %v", err, complete)
	}
	if got := paths[7]; !slices.Equal(got, []string{"/big", "/nested"}) {
		t.Fatalf("volume 7: %v", got)
	}
	if len(unsure) != 1 || unsure["/gone"] == nil {
		t.Fatalf("unsure: %v", unsure)
	}
	// A lost manifest needle names its file without reading it.
	opens := blobs.Opens.Load()
	m := hit[0]
	id, _ := fid.Parse(m.Fid)
	paths, _, _, _, err = lostFiles(ctx, &fakeTree{pageSize: 10, dirs: map[string][]*filerpb.Entry{"/": {{Path: "/big", Chunks: hit}}}},
		blobs, map[uint32]map[uint64]bool{id.Volume: {id.Key: true}}, 100)
	if err != nil || !slices.Equal(paths[id.Volume], []string{"/big"}) || blobs.Opens.Load() != opens {
		t.Fatalf("lost manifest: %v %v, %d opens", paths, err, blobs.Opens.Load()-opens)
	}
}

// TestECRebuildFilerFlag: a bad -filer is a usage error before anything.
func TestECRebuildFilerFlag(t *testing.T) {
	out := &testutil.Buffer{}
	sh, err := New(Config{Masters: []string{"127.0.0.1:1"}, Out: out, Owner: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	for _, bad := range []string{"ec.rebuild -filer=nope", "ec.rebuild -filerScanLimit=0"} {
		if err := run(t, sh, bad); !errors.Is(err, ErrUsage) {
			t.Fatalf("%s: %v", bad, err)
		}
	}
}

// TestECRebuildNamesLostFiles: files written through a filer into an EC
// collection; a whole rack (3 of the 6 shards at 4+2) is lost; ec.rebuild
// -filer names exactly the files that cannot be read, and changes nothing.
func TestECRebuildNamesLostFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	specs := []testcluster.VolumeSpec{{DataCenter: "dc1", Rack: "r1"}, {DataCenter: "dc1", Rack: "r1"},
		{DataCenter: "dc1", Rack: "r2"}, {DataCenter: "dc1", Rack: "r2"}}
	c := testcluster.Start(t, testcluster.Options{Volumes: specs, VolumeSizeLimit: 2 << 20, RunShell: RunScriptOn})
	fsrv, err := filerserver.New(filerserver.Config{Masters: c.MasterAddrs(), Dir: t.TempDir(), Collection: "ec",
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fsrv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	put := func(p string, data []byte) {
		req, _ := http.NewRequest(http.MethodPut, "http://"+fsrv.Addr()+p, bytes.NewReader(data))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("PUT %s: %s", p, resp.Status)
		}
	}
	const n = 120
	for i := range n {
		put(fmt.Sprintf("/d/e%d/f%03d", i%3, i), bytes.Repeat([]byte{byte(i)}, 1500+i*13))
	}
	out := &testutil.Buffer{}
	sh, err := New(Config{Masters: c.MasterAddrs(), Out: out, Owner: "ec test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Close() })
	mustRun(t, sh, out, "lock\ncluster.configure -collection=ec -ec=4+2\nec.encode -collection=ec -fullPercent=0 -quietFor=0s -force\nunlock")
	c.Volume[0].Kill()
	c.Volume[1].Kill()

	_, port, _ := strings.Cut(fsrv.Addr(), ":")
	_, gport, _ := strings.Cut(fsrv.GRPCAddr(), ":")
	out.Reset()
	err = run(t, sh, fmt.Sprintf("lock\nec.rebuild -collection=ec -force -filer=127.0.0.1:%s.%s\nunlock", port, gport))
	if err == nil || !strings.Contains(err.Error(), "fewer than k") {
		t.Fatalf("ec.rebuild with a rack lost: %v\n%s", err, out)
	}
	named := map[string]bool{}
	for _, line := range strings.Split(out.String(), "\n") {
		if p, ok := strings.CutPrefix(line, "  lost file "); ok {
			named[p] = true
		}
	}
	if len(named) == 0 || !strings.Contains(out.String(), "filer walk complete") {
		t.Fatalf("no file named:\n%s", out)
	}
	for i := range n {
		p := fmt.Sprintf("/d/e%d/f%03d", i%3, i)
		resp, err := http.Get("http://" + fsrv.Addr() + p)
		ok := false
		if err == nil {
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			ok = rerr == nil && resp.StatusCode == http.StatusOK && bytes.Equal(b, bytes.Repeat([]byte{byte(i)}, 1500+i*13))
		}
		if ok == named[p] {
			t.Fatalf("%s: readable %v, named lost %v\n%s", p, ok, named[p], out)
		}
	}
}
