package testcluster_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/testcluster"
)

// TestLocalReadsAnswerAsHTTPDoes reads needles small and large, whole and in
// ranges, through a client with local reads (the volume server's Unix
// socket and file descriptor, internal/localread) and through HTTP alone:
// the bytes, the sizes, the ETag, the type and the errors must be the same,
// and the local path must have served them.
func TestLocalReadsAnswerAsHTTPDoes(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}}, Fsync: true})
	ctx := context.Background()
	httpOnly, err := client.New(client.Config{Masters: c.MasterAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	local, err := client.New(client.Config{Masters: c.MasterAddrs(), LocalReads: true})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	var ids []fid.FileID
	for _, size := range []int{1, 1000, 100 << 10, 1 << 20, 3<<20 + 17} {
		body := make([]byte, size)
		for i := range body {
			body[i] = byte(rng.UintN(256))
		}
		id, _, err := local.PutBytes(ctx, client.AssignRequest{}, body, client.UploadOptions{MimeType: "text/plain", Name: "f.txt"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		whole, _ := get(t, httpOnly, id, nil)
		size := int64(len(whole))
		for _, r := range []*client.Range{nil, {Offset: 0, Length: 10}, {Offset: 5}, {Offset: size - 3, Length: 100},
			{Offset: size / 2, Length: size / 4}, {Offset: 0, Length: size}, {Offset: size + 10}} {
			wantBody, wantInfo := get(t, httpOnly, id, r)
			gotBody, gotInfo := get(t, local, id, r)
			if !bytes.Equal(gotBody, wantBody) {
				t.Fatalf("%s %+v: local read gives %d bytes, HTTP %d (or different bytes)", id, r, len(gotBody), len(wantBody))
			}
			gotInfo.LastModified, wantInfo.LastModified = gotInfo.LastModified.UTC(), wantInfo.LastModified.UTC()
			if gotInfo != wantInfo {
				t.Fatalf("%s %+v: local info %+v, HTTP %+v", id, r, gotInfo, wantInfo)
			}
		}
	}
	if n := localReads(t, c); n == 0 {
		t.Fatal("no read took the local path")
	}

	// A deleted needle: the local path falls back and HTTP's error stands.
	if err := local.Delete(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, _, err := local.Get(ctx, ids[0], nil); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("deleted needle: %v, want ErrNotFound", err)
	}
}

// TestLocalReadChecksCRC corrupts a large needle's data on disk: the local
// read of the whole needle fails, with its last piece withheld, as HTTP's does.
func TestLocalReadChecksCRC(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}}, Fsync: true})
	ctx := context.Background()
	local, err := client.New(client.Config{Masters: c.MasterAddrs(), LocalReads: true})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	body := bytes.Repeat([]byte("kelp-local-read-"), 1<<17) // 2 MiB
	id, _, err := local.PutBytes(ctx, client.AssignRequest{}, body, client.UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	flipDataByte(t, c.Volume[0].Dirs[0], id.Volume, []byte("kelp-local-read-"))
	before := localReads(t, c)
	rc, _, err := local.Get(ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("read of a corrupt needle: %d bytes, %v; want a checksum error", len(got), err)
	}
	if len(got) >= len(body) {
		t.Fatalf("a corrupt needle read gave all %d bytes", len(got))
	}
	if localReads(t, c) == before {
		t.Fatal("the read did not take the local path")
	}
	// A range that is not the whole needle cannot be checked, on either path.
	if b, _ := get(t, local, id, &client.Range{Offset: 0, Length: 100}); len(b) != 100 {
		t.Fatalf("range read gave %d bytes", len(b))
	}
}

// get reads id (range r) and returns the bytes and info; an error of Get is
// returned as its text in the body, so that the two paths' errors compare.
func get(t *testing.T, c *client.Client, id fid.FileID, r *client.Range) ([]byte, client.ObjectInfo) {
	t.Helper()
	rc, info, err := c.Get(context.Background(), id, r)
	if err != nil {
		return []byte("error " + err.Error()), client.ObjectInfo{}
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", id, err)
	}
	return b, info
}

// localReads is how many local reads the cluster's volume servers answered.
func localReads(t *testing.T, c *testcluster.Cluster) float64 {
	t.Helper()
	var n float64
	for _, v := range c.Volume {
		mfs, err := v.VolumeServer().Metrics().Prometheus().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "kelp_http_requests_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "op" && l.GetValue() == "local_read" {
						n += m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	return n
}

// flipDataByte changes one byte of pattern's first occurrence in volume
// vol's data file under dir.
func flipDataByte(t *testing.T, dir string, vol uint32, pattern []byte) {
	t.Helper()
	var dat string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		base, want := filepath.Base(p), strconv.FormatUint(uint64(vol), 10)+".dat"
		if err == nil && (base == want || strings.HasSuffix(base, "_"+want)) {
			dat = p
		}
		return nil
	})
	if dat == "" {
		t.Fatalf("no data file of volume %d under %s", vol, dir)
	}
	b, err := os.ReadFile(dat)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, pattern)
	if i < 0 {
		t.Fatal("pattern not in the data file")
	}
	f, err := os.OpenFile(dat, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{b[i+100] ^ 0xff}, int64(i+100)); err != nil {
		t.Fatal(err)
	}
}

// TestLocalReadsOfReplicatedVolumes: of a volume's two copies only one
// answers local reads (the other server has them off, as a server on
// another host would); every read of a client with local reads takes it and
// reads the right bytes. (The master happens to list that copy first here;
// client's TestLocalReadsPreferTheCopyOnThisHost checks the preference when
// it comes second.)
func TestLocalReadsOfReplicatedVolumes(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{NoLocalReads: true}, {}},
		DefaultReplication: "001", Fsync: true})
	ctx := context.Background()
	local, err := client.New(client.Config{Masters: c.MasterAddrs(), LocalReads: true})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	bodies := map[fid.FileID][]byte{}
	for i := range 20 {
		body := bytes.Repeat([]byte{byte(i)}, 10000+i)
		id, _, err := local.PutBytes(ctx, client.AssignRequest{}, body, client.UploadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		bodies[id] = body
	}
	for id := range bodies {
		locs, err := local.Lookup(ctx, id.Volume)
		if err != nil || len(locs) != 2 {
			t.Fatalf("volume %d: %d copies, %v; want 2", id.Volume, len(locs), err)
		}
	}
	before := localReads(t, c)
	for id, body := range bodies {
		if got, _ := get(t, local, id, nil); !bytes.Equal(got, body) {
			t.Fatalf("%s: read %d bytes, want %d", id, len(got), len(body))
		}
	}
	if n := localReads(t, c) - before; n != float64(len(bodies)) {
		t.Fatalf("%v of %d reads took the copy on this host", n, len(bodies))
	}
}
