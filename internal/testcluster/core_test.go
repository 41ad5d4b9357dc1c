package testcluster_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/pb/volumepb"
	"github.com/kelpfs/kelp/internal/testcluster"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// content is the deterministic body of file i: its size varies from 0 bytes to
// a few KiB and its bytes depend on i, so a mix-up between files is caught.
func content(i int) []byte {
	b := make([]byte, (i*37)%4099)
	for j := 0; j < len(b); j += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], uint64(i)*0x9e3779b97f4a7c15+uint64(j))
		copy(b[j:], w[:])
	}
	return b
}

func readAll(t *testing.T, c *client.Client, id fid.FileID) ([]byte, error) {
	t.Helper()
	rc, _, err := c.Get(context.Background(), id, nil)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// TestCoreWriteRestartReadDeleteVacuum is issue 2's cluster test: a master and
// two volume servers; 10,000 files written; everything restarted; every file
// read back byte for byte; then deletes, a vacuum, and another restart.
func TestCoreWriteRestartReadDeleteVacuum(t *testing.T) {
	n := 10000
	if testing.Short() {
		n = 1000
	}
	c := testcluster.Start(t, testcluster.Options{
		Volumes: []testcluster.VolumeSpec{{}, {}},
		Fsync:   true,
	})
	cl, err := client.New(client.Config{Masters: []string{c.Master.Addr}})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]fid.FileID, n)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				id, _, err := cl.PutBytes(context.Background(), client.AssignRequest{}, content(i), client.UploadOptions{})
				if err != nil {
					errs <- fmt.Errorf("put %d: %w", i, err)
					return
				}
				ids[i] = id
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[fid.FileID]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("file id %s handed out twice", id)
		}
		seen[id] = true
	}

	c.RestartAll()
	cl, _ = client.New(client.Config{Masters: []string{c.Master.Addr}})
	for i, id := range ids {
		got, err := readAll(t, cl, id)
		if err != nil || !bytes.Equal(got, content(i)) {
			t.Fatalf("after restart, file %d (%s): %d bytes, err %v; want %d bytes", i, id, len(got), err, len(content(i)))
		}
	}

	// Delete every third file; the rest must survive a vacuum and a restart.
	for i := 0; i < n; i += 3 {
		if err := cl.Delete(context.Background(), ids[i]); err != nil {
			t.Fatalf("delete %s: %v", ids[i], err)
		}
	}
	vacuumed := vacuumAll(t, c)
	if vacuumed == 0 {
		t.Fatal("no volume was vacuumed although a third of the files were deleted")
	}
	c.RestartAll()
	cl, _ = client.New(client.Config{Masters: []string{c.Master.Addr}})
	for i, id := range ids {
		got, err := readAll(t, cl, id)
		if i%3 == 0 {
			if !errors.Is(err, client.ErrNotFound) {
				t.Fatalf("deleted file %s reads back: err %v", id, err)
			}
			continue
		}
		if err != nil || !bytes.Equal(got, content(i)) {
			t.Fatalf("after vacuum and restart, file %d (%s): %d bytes, err %v", i, id, len(got), err)
		}
	}
}

// vacuumAll vacuums every volume on every volume server through the admin API
// and returns how many were compacted.
func vacuumAll(t *testing.T, c *testcluster.Cluster) int {
	t.Helper()
	vacuumed := 0
	for _, v := range c.Volume {
		addr := v.VolumeServer().GRPCAddr()
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		admin := volumepb.NewVolumeServerClient(conn)
		for id := uint32(1); id <= 64; id++ {
			st, err := admin.VolumeStatus(context.Background(), &volumepb.VolumeStatusRequest{VolumeId: id})
			if err != nil {
				continue
			}
			res, err := admin.VacuumVolume(context.Background(), &volumepb.VacuumVolumeRequest{VolumeId: id, GarbageThreshold: 0.1})
			if err != nil {
				t.Fatalf("vacuum volume %d on %s: %v", id, v.Addr, err)
			}
			if res.Vacuumed {
				vacuumed++
				if res.SizeAfter >= res.SizeBefore {
					t.Errorf("volume %d: vacuum went from %d to %d bytes", id, res.SizeBefore, res.SizeAfter)
				}
				if st.DeletedBytes == 0 {
					t.Errorf("volume %d vacuumed without garbage", id)
				}
			}
		}
		conn.Close()
	}
	return vacuumed
}
