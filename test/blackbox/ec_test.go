package blackbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/pb"
	"github.com/kelpfs/kelp/internal/testutil"
)

// TestErasureCodingKillDashNine is issue 11's multi-process check: 1 master
// and 4 volume servers (kelp processes) in 2 racks; a few thousand small
// files and a few large ones; ec.encode; kill -9 of one volume server;
// every file read back byte for byte; ec.rebuild; every shard present again
// on the live servers; ec.decode of each volume and every file read again.
func TestErasureCodingKillDashNine(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 5 processes")
	}
	dir := t.TempDir()
	ports := testutil.FreePorts(t, 5, pb.GRPCPortOffset, pb.RaftPortOffset)
	master := hostport(ports[0])
	startKelp(t, "master", "--ip=127.0.0.1", "--port="+strconv.Itoa(ports[0]), "--mdir="+filepath.Join(dir, "m"), "--volume-size-limit-mb=4")
	waitAnswers(t, "http://"+master+"/healthz")
	vols := make([]*process, 4)
	urls := make([]string, 4)
	for i := range vols {
		rack := "r" + strconv.Itoa(1+i/2)
		urls[i] = hostport(ports[1+i])
		vols[i] = startKelp(t, "volume", "--ip=127.0.0.1", "--port="+strconv.Itoa(ports[1+i]), "--master="+master,
			"--dir="+filepath.Join(dir, "v"+strconv.Itoa(i)), "--max=30", "--data-center=dc1", "--rack="+rack)
	}
	for _, u := range urls {
		waitAnswers(t, "http://"+u+"/healthz")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cl, err := client.New(client.Config{Masters: []string{master}, LookupTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, func() bool {
		_, _, err := cl.PutBytes(ctx, client.AssignRequest{Collection: "warm"}, []byte("x"), client.UploadOptions{})
		return err == nil
	}, "the volume servers to take writes")

	// 4 large files, one after the other while the 4 MiB volumes are
	// empty (each holds two of them), then 3000 small ones by 8 workers.
	// A large file written later could find every volume too full for it
	// (507) before the master learns from heartbeats that they are.
	files := map[fid.FileID][]byte{}
	r := rand.New(rand.NewPCG(99, 11))
	for range 4 {
		data := make([]byte, 768<<10+r.IntN(768<<10))
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		id, _, err := cl.PutBytes(ctx, client.AssignRequest{Collection: "ec"}, data, client.UploadOptions{})
		if err != nil {
			t.Fatalf("put of a large file: %v", err)
		}
		files[id] = data
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 11))
			for i := w; i < 3000; i += 8 {
				size := 200 + r.IntN(2000)
				data := make([]byte, size)
				for j := range data {
					data[j] = byte(r.Uint32())
				}
				id, _, err := cl.PutBytes(ctx, client.AssignRequest{Collection: "ec"}, data, client.UploadOptions{})
				if err != nil {
					errc <- err
					return
				}
				mu.Lock()
				files[id] = data
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatalf("put: %v", err)
	}

	shellRun(t, master, "lock; cluster.configure -collection=ec -ec=4+2; ec.encode -collection=ec -fullPercent=0 -quietFor=0s -force; unlock")
	ecVols := liveShards(t, urls)
	if len(ecVols) == 0 {
		t.Fatal("no EC volume after ec.encode")
	}
	for vid, s := range ecVols {
		if countBits(s) != 6 {
			t.Fatalf("volume %d: shards %b after ec.encode", vid, s)
		}
	}
	readEvery(t, ctx, cl, files, "after ec.encode")

	// kill -9 the server holding the most shards.
	victim, most := 0, -1
	for i, u := range urls {
		n := 0
		for _, s := range liveShards(t, []string{u}) {
			n += countBits(s)
		}
		if n > most {
			victim, most = i, n
		}
	}
	vols[victim].kill()
	live := append(append([]string{}, urls[:victim]...), urls[victim+1:]...)
	readEvery(t, ctx, cl, files, "with one of 4 volume servers killed")

	shellRun(t, master, "lock; ec.rebuild -collection=ec -force; unlock")
	for vid, s := range liveShards(t, live) {
		if countBits(s) != 6 {
			t.Fatalf("volume %d: shards %b on the live servers after ec.rebuild", vid, s)
		}
	}
	readEvery(t, ctx, cl, files, "after ec.rebuild")

	// Decode every EC volume back to a normal one.
	var script strings.Builder
	script.WriteString("lock")
	for vid := range ecVols {
		fmt.Fprintf(&script, "; ec.decode -volumeId=%d -force", vid)
	}
	script.WriteString("; unlock")
	shellRun(t, master, script.String())
	if left := liveShards(t, live); len(left) != 0 {
		t.Fatalf("shards left after ec.decode: %v", left)
	}
	readEvery(t, ctx, cl, files, "after ec.decode")
}

func waitAnswers(t *testing.T, url string) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, func() bool { return answers(url) }, url+" to answer")
}

// shellRun runs kelp shell commands; a failure fails the test.
func shellRun(t *testing.T, master, commands string) string {
	t.Helper()
	out, err := exec.Command(kelpBin, "shell", "--master="+master, "-c", commands).CombinedOutput()
	if err != nil {
		t.Fatalf("kelp shell -c %q: %v\n%s", commands, err, out)
	}
	return string(out)
}

// liveShards is the union of EC shards per volume on the given servers
// (their /status).
func liveShards(t *testing.T, servers []string) map[uint32]uint32 {
	t.Helper()
	out := map[uint32]uint32{}
	for _, u := range servers {
		var st struct {
			Disks []struct {
				EcShards []struct {
					ID     uint32
					Shards uint32
				}
			} `json:"disks"`
		}
		resp, err := http.Get("http://" + u + "/status")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range st.Disks {
			for _, e := range d.EcShards {
				if e.Shards != 0 {
					out[e.ID] |= e.Shards
				}
			}
		}
	}
	return out
}

func countBits(x uint32) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// readEvery reads every file back through the client, 8 at a time.
func readEvery(t *testing.T, ctx context.Context, cl *client.Client, files map[fid.FileID][]byte, when string) {
	t.Helper()
	ids := make(chan fid.FileID)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []string
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ids {
				rc, _, err := cl.Get(ctx, id, nil)
				var got []byte
				if err == nil {
					got, err = io.ReadAll(rc)
					rc.Close()
				}
				if err != nil || !bytes.Equal(got, files[id]) {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("%s: %d bytes, err %v", id, len(got), err))
					mu.Unlock()
				}
			}
		}()
	}
	for id := range files {
		ids <- id
	}
	close(ids)
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%s: %d of %d files do not read back, e.g. %s", when, len(failed), len(files), failed[0])
	}
}
