package shell

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/erasure"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/testcluster"
	"github.com/kelpfs/kelp/internal/testutil"
)

// readFrom reads a needle from one volume server, without fail-over.
func readFrom(server string, id fid.FileID) (int, []byte, error) {
	resp, err := http.Get("http://" + server + "/" + id.String())
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func readAll(ctx context.Context, cl *client.Client, id fid.FileID) ([]byte, error) {
	rc, _, err := cl.Get(ctx, id, nil)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func checkFiles(t *testing.T, ctx context.Context, cl *client.Client, files map[fid.FileID][]byte, when string) {
	t.Helper()
	for id, want := range files {
		got, err := readAll(ctx, cl, id)
		if err != nil {
			t.Fatalf("%s: read %s: %v", when, id, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: read %s: %d bytes differ from the %d written", when, id, len(got), len(want))
		}
	}
}

// ecShardCount sums the distinct shards of every EC volume the master shows.
func ecShardCount(t *testing.T, ctx context.Context, sh *Shell) (volumes, shards int) {
	t.Helper()
	v, err := sh.fetchView(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range v.ecStates("") {
		volumes++
		shards += st.present.Count()
	}
	return volumes, shards
}

// TestClusterErasureCoding is issue 11's scenario on an in-process cluster:
// 4 volume servers in 2 racks; small files and a few large ones; ec.encode
// (dry run first); every file read back; a delete; one server killed and
// every file read back degraded; ec.rebuild restores every shard; ec.decode
// turns a volume back into a normal one.
func TestClusterErasureCoding(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	specs := []testcluster.VolumeSpec{{DataCenter: "dc1", Rack: "r1"}, {DataCenter: "dc1", Rack: "r1"},
		{DataCenter: "dc1", Rack: "r2"}, {DataCenter: "dc1", Rack: "r2"}}
	c := testcluster.Start(t, testcluster.Options{Volumes: specs, PulseInterval: 300 * time.Millisecond, VolumeSizeLimit: 2 << 20})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, err := client.New(client.Config{Masters: c.MasterAddrs(), LookupTTL: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(11, 4))
	files := map[fid.FileID][]byte{}
	for i := range 300 {
		size := 1024 + r.IntN(7*1024)
		if i%60 == 7 {
			size = 300<<10 + r.IntN(200<<10)
		}
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		id, _, err := cl.PutBytes(ctx, client.AssignRequest{Collection: "ec"}, data, client.UploadOptions{})
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		files[id] = data
	}
	out := &testutil.Buffer{}
	sh, err := New(Config{Masters: c.MasterAddrs(), Out: out, Owner: "ec test"})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()

	if err := run(t, sh, "lock\ncluster.configure -collection=ec -ec=4+0"); err == nil {
		t.Fatal("cluster.configure took scheme 4+0")
	}
	wantLines(t, mustRun(t, sh, out, "cluster.configure -collection=ec -ec=4+2\nunlock"), `collection "ec" erasure coding: 4+2`)
	got := mustRun(t, sh, out, "ec.encode -collection=ec -fullPercent=0 -quietFor=0s")
	wantLines(t, got, "plan: encode", "as 4+2", "dry run")
	if n, _ := ecShardCount(t, ctx, sh); n != 0 {
		t.Fatalf("a dry run made %d EC volumes", n)
	}
	if err := run(t, sh, "ec.encode -collection=ec -fullPercent=0 -quietFor=0s -force"); err == nil {
		t.Fatal("ec.encode -force ran without the admin lock")
	}
	// An encode interrupted after the shards were written (here: all on
	// the copy's server) but before the copy was deleted.
	var some fid.FileID
	for id := range files {
		some = id
		break
	}
	for _, n := range c.Volume {
		st := n.VolumeServer().Store()
		if _, ok := st.Volume(some.Volume); ok {
			if err := st.MarkReadOnly(some.Volume, true); err != nil {
				t.Fatal(err)
			}
			if err := st.EcEncode(ctx, some.Volume, erasure.Scheme{Data: 4, Parity: 2}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { n, _ := ecShardCount(t, ctx, sh); return n == 1 }, "the leftover shards to show")
	got = mustRun(t, sh, out, "lock\nec.encode -collection=ec -fullPercent=0 -quietFor=0s -force\nunlock")
	wantLines(t, got, "done", "interrupted encode")
	vols, shards := ecShardCount(t, ctx, sh)
	if vols == 0 || shards != vols*6 {
		t.Fatalf("after ec.encode: %d EC volumes with %d shards in all\n%s", vols, shards, got)
	}
	v, _ := sh.fetchView(ctx)
	for id := range files {
		if _, normal := v.copies[id.Volume]; normal {
			t.Fatalf("volume %d still has its original copies", id.Volume)
		}
	}
	checkFiles(t, ctx, cl, files, "after ec.encode")
	wantLines(t, mustRun(t, sh, out, "volume.list"), "ec volume", "scheme 4+2")

	// A delete reaches every holder's journal.
	var gone fid.FileID
	for id := range files {
		gone = id
		break
	}
	if err := cl.Delete(ctx, gone); err != nil {
		t.Fatalf("delete from an EC volume: %v", err)
	}
	delete(files, gone)
	if _, err := readAll(ctx, cl, gone); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("read of a deleted needle: %v", err)
	}

	// Lose one server: 1 or 2 of 6 shards.
	victim := c.Volume[0]
	victim.Kill()
	checkFiles(t, ctx, cl, files, "with one of 4 servers killed")
	testutil.WaitFor(t, 10*time.Second, func() bool {
		v, err := sh.fetchView(ctx)
		return err == nil && len(v.nodes) == 3
	}, "the master to drop the killed server")
	_, shards = ecShardCount(t, ctx, sh)
	if shards >= vols*6 {
		t.Fatalf("no shard lost with a server killed")
	}
	wantLines(t, mustRun(t, sh, out, "volume.list"), "missing shards", "run ec.rebuild")
	got = mustRun(t, sh, out, "ec.rebuild -collection=ec")
	wantLines(t, got, "plan: rebuild", "dry run")
	got = mustRun(t, sh, out, "lock\nec.rebuild -collection=ec -force\nunlock")
	testutil.WaitFor(t, 10*time.Second, func() bool {
		_, n := ecShardCount(t, ctx, sh)
		return n == vols*6
	}, "every shard back")
	checkFiles(t, ctx, cl, files, "after ec.rebuild")
	if _, err := readAll(ctx, cl, gone); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("read of a deleted needle after rebuild: %v", err)
	}
	wantLines(t, mustRun(t, sh, out, "ec.rebuild -collection=ec"), "every EC volume that can be rebuilt has all its shards")

	// A delete while the victim is away misses its journal; when it comes
	// back (its old shards too) it catches up from the other holders' journals
	// by itself (or ec.rebuild -force merges them, whichever comes first).
	var gone2 fid.FileID
	for id := range files {
		gone2 = id
		break
	}
	if err := cl.Delete(ctx, gone2); err != nil {
		t.Fatalf("delete with a holder away: %v", err)
	}
	delete(files, gone2)
	victim.Start(t)
	testutil.WaitFor(t, 10*time.Second, func() bool {
		v, err := sh.fetchView(ctx)
		return err == nil && len(v.nodes) == 4
	}, "the victim to come back")
	got = mustRun(t, sh, out, "lock\nec.rebuild -collection=ec -force\nunlock")
	wantLines(t, got, "delete journals merged: ")
	if code, _, err := readFrom(victim.VolumeServer().URL(), gone2); err != nil || code != 404 {
		t.Fatalf("read of a needle deleted while its holder was away, from that holder: %d %v", code, err)
	}

	// The victim is back with room to spare: ec.balance plans moves onto
	// it (the plan only, without -force), applies them under the lock, and
	// afterwards has nothing left to move; no shard and no file is lost.
	wantLines(t, mustRun(t, sh, out, "ec.balance -collection=ec"), "dry run")
	if err := run(t, sh, "ec.balance -collection=ec -force"); err == nil {
		t.Fatal("ec.balance -force ran without the admin lock")
	}
	mustRun(t, sh, out, "lock\nec.balance -collection=ec -force\nunlock")
	testutil.WaitFor(t, 10*time.Second, func() bool {
		_, n := ecShardCount(t, ctx, sh)
		return n == vols*6 && strings.Contains(mustRun(t, sh, out, "ec.balance -collection=ec"), "EC shards are balanced")
	}, "every shard kept and nothing left to move after ec.balance")
	v, _ = sh.fetchView(ctx)
	for _, st := range v.ecStates("ec") {
		if _, ok := st.holders[victim.VolumeServer().URL()]; !ok {
			t.Fatalf("ec.balance left volume %d without a shard on the returned server: %v", st.id, st.holders)
		}
	}
	checkFiles(t, ctx, cl, files, "after ec.balance")

	// Decode one volume back.
	v, _ = sh.fetchView(ctx)
	st := v.ecStates("ec")[0]
	got = mustRun(t, sh, out, fmt.Sprintf("lock\nec.decode -volumeId=%d -force\nunlock", st.id))
	wantLines(t, got, "is a normal volume")
	testutil.WaitFor(t, 10*time.Second, func() bool {
		v, err := sh.fetchView(ctx)
		_, ec := v.ecShards()[st.id]
		return err == nil && len(v.copies[st.id]) == 1 && !ec
	}, "the decoded volume to be normal")
	checkFiles(t, ctx, cl, files, "after ec.decode")
	if _, err := readAll(ctx, cl, gone); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("read of a deleted needle after decode: %v", err)
	}
	if strings.Contains(mustRun(t, sh, out, "volume.list"), fmt.Sprintf("ec volume %d ", st.id)) {
		t.Fatal("volume.list still shows shards of the decoded volume")
	}

	// collection.delete takes the EC volumes too.
	wantLines(t, mustRun(t, sh, out, "lock\ncollection.delete -collection=ec -force\nunlock"), "deleted shards")
	testutil.WaitFor(t, 10*time.Second, func() bool { n, _ := ecShardCount(t, ctx, sh); return n == 0 }, "no EC volume left")
}

// TestLostKeys: with data shards lost, exactly the needles whose records
// touch them are lost.
func TestLostKeys(t *testing.T) {
	l := erasure.NewLayout(erasure.Scheme{Data: 4, Parity: 2}, 4*8192)
	x := &erasure.Index{Layout: l, Entries: []needle.IndexEntry{
		{Key: 1, Offset: 32, Size: 100},          // shard 0
		{Key: 2, Offset: 8192 - 64, Size: 200},   // shards 0 and 1
		{Key: 3, Offset: 2*8192 + 8, Size: 100},  // shard 2
		{Key: 4, Offset: 3*8192 + 16, Size: 100}, // shard 3
	}}
	got := lostKeys(x, erasure.SetOf(0, 2, 3, 4, 5))
	if len(got) != 1 || got[0] != 2 {
		t.Fatalf("lost with shard 1 gone: %v", got)
	}
	got = lostKeys(x, erasure.SetOf(1, 2, 4))
	if len(got) != 3 {
		t.Fatalf("lost with shards 0 and 3 gone: %v", got)
	}
}

// ecCluster starts 4 volume servers in 2 racks, writes n files (a few
// large) into collection "ec" and erasure-codes them 4+2 with the shell.
func ecCluster(t *testing.T, n int, pulse, rebuildAfter time.Duration) (*testcluster.Cluster, *client.Client, *Shell, *testutil.Buffer, map[fid.FileID][]byte) {
	t.Helper()
	specs := []testcluster.VolumeSpec{{DataCenter: "dc1", Rack: "r1"}, {DataCenter: "dc1", Rack: "r1"},
		{DataCenter: "dc1", Rack: "r2"}, {DataCenter: "dc1", Rack: "r2"}}
	c := testcluster.Start(t, testcluster.Options{Volumes: specs, PulseInterval: pulse, VolumeSizeLimit: 2 << 20,
		EcRebuildAfter: rebuildAfter, RunShell: RunScriptOn})
	ctx := context.Background()
	cl, err := client.New(client.Config{Masters: c.MasterAddrs(), LookupTTL: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(uint64(n), 7))
	files := map[fid.FileID][]byte{}
	for i := range n {
		size := 512 + r.IntN(4*1024)
		if i%50 == 7 {
			size = 200<<10 + r.IntN(100<<10)
		}
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		id, _, err := cl.PutBytes(ctx, client.AssignRequest{Collection: "ec"}, data, client.UploadOptions{})
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		files[id] = data
	}
	out := &testutil.Buffer{}
	sh, err := New(Config{Masters: c.MasterAddrs(), Out: out, Owner: "ec test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Close() })
	mustRun(t, sh, out, "lock\ncluster.configure -collection=ec -ec=4+2\nec.encode -collection=ec -fullPercent=0 -quietFor=0s -force\nunlock")
	vols, shards := ecShardCount(t, ctx, sh)
	if vols == 0 || shards != vols*6 {
		t.Fatalf("after ec.encode: %d EC volumes with %d shards in all\n%s", vols, shards, out)
	}
	return c, cl, sh, out, files
}

// TestECDeleteWithHolderDown: a delete made while a shard holder is down
// (and still listed by the master) succeeds once the live holders, which
// hold at least k shards, journaled it; the holder that missed it, back,
// answers 404 for it before any ec.rebuild merges journals, and serves the
// other files.
func TestECDeleteWithHolderDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	// A long pulse: the master keeps listing the killed server for a while.
	c, cl, _, _, files := ecCluster(t, 60, 2*time.Second, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	victim := c.Volume[0]
	victimURL := victim.VolumeServer().URL()
	var gone fid.FileID
	for id := range files {
		if ev, ok := victim.VolumeServer().Store().EcVolume(id.Volume); ok && ev.Shards() != 0 {
			gone = id
			break
		}
	}
	if gone.Volume == 0 {
		t.Fatal("the victim holds no shard")
	}
	// Killed, not stopped: a stopped server ends its heartbeat stream and
	// is dropped at once; a killed one stays listed (marked unreachable)
	// until the dead timeout.
	victim.Crash()
	locs, err := cl.Lookup(ctx, gone.Volume)
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, l := range locs {
		listed = listed || l.URL == victimURL
	}
	if !listed {
		t.Fatal("the master dropped the killed server already; the test needs it listed")
	}
	if err := cl.Delete(ctx, gone); err != nil {
		t.Fatalf("delete with a listed holder down: %v", err)
	}
	delete(files, gone)
	// (The client itself answers an error rather than 404 while the master
	// lists the dead holder: a location not reached might have the needle.)
	if code, _, err := readFrom(c.Volume[1].VolumeServer().URL(), gone); err != nil || code != http.StatusNotFound {
		t.Fatalf("read of the deleted needle from a live holder: %d %v", code, err)
	}
	victim.Start(t)
	// Straight from the returned holder, with no ec.rebuild run.
	code, _, err := readFrom(victimURL, gone)
	if err != nil || code != http.StatusNotFound {
		t.Fatalf("the returned holder answered %d (%v) for a needle deleted while it was away", code, err)
	}
	for id, want := range files {
		if id.Volume != gone.Volume {
			continue
		}
		code, got, err := readFrom(victimURL, id)
		if err != nil || code != 200 || !bytes.Equal(got, want) {
			t.Fatalf("read %s from the returned holder: %d %v", id, code, err)
		}
	}
	checkFiles(t, ctx, cl, files, "after the holder returned")
}

// TestECAutoRebuild: with --ec.rebuild-after, the leader rebuilds the
// shards of a killed server by itself once they have been missing that
// long, and /cluster/status shows it waiting, then done.
func TestECAutoRebuild(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	c, cl, sh, _, files := ecCluster(t, 60, 300*time.Millisecond, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	vols, all := ecShardCount(t, ctx, sh)
	c.Volume[0].Kill()
	testutil.WaitFor(t, 10*time.Second, func() bool { _, n := ecShardCount(t, ctx, sh); return n < all }, "the master to see shards missing")
	var st struct {
		EcRepair *struct {
			RebuildAfter string `json:"rebuildAfter"`
			Waiting      []struct {
				Volume uint32 `json:"volume"`
			} `json:"waiting"`
			Last string `json:"last"`
		} `json:"ecRepair"`
	}
	status := func() {
		resp, err := http.Get("http://" + c.Leader().Addr + "/cluster/status")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		st.EcRepair = nil
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 5*time.Second, func() bool { status(); return st.EcRepair != nil && len(st.EcRepair.Waiting) > 0 }, "/cluster/status to show a rebuild waiting")
	if st.EcRepair.RebuildAfter != "2s" {
		t.Fatalf("rebuildAfter %q", st.EcRepair.RebuildAfter)
	}
	testutil.WaitFor(t, 40*time.Second, func() bool { _, n := ecShardCount(t, ctx, sh); return n == all }, "the leader to rebuild every shard")
	testutil.WaitFor(t, 5*time.Second, func() bool { status(); return strings.Contains(st.EcRepair.Last, "rebuilt") }, "/cluster/status to show the rebuild done")
	if v, n := ecShardCount(t, ctx, sh); v != vols || n != vols*6 {
		t.Fatalf("after the automatic rebuild: %d volumes, %d shards", v, n)
	}
	checkFiles(t, ctx, cl, files, "after the automatic rebuild")
}

// TestECVacuum: after deleting most files of an EC volume, ec.vacuum plans
// its compaction (dry run), then shrinks its shards; every live file reads,
// every deleted one is 404.
func TestECVacuum(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	_, cl, sh, out, files := ecCluster(t, 120, 300*time.Millisecond, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	v, _ := sh.fetchView(ctx)
	st := v.ecStates("ec")[0]
	size := func() (n int64) {
		v, err := sh.fetchView(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range v.ecShards()[st.id] {
			n += int64(erasure.ShardSet(e.GetShards()).Count()) * int64(e.GetShardSize())
		}
		return n
	}
	before := size()
	// Every file of the volume but its smallest is deleted: garbage is
	// counted in bytes, and file sizes vary, so deleting a share of the files
	// says little of the share of bytes.
	var keep fid.FileID
	for id, data := range files {
		if id.Volume == st.id && (keep == (fid.FileID{}) || len(data) < len(files[keep])) {
			keep = id
		}
	}
	var deleted []fid.FileID
	for id := range files {
		if id.Volume == st.id && id != keep {
			if err := cl.Delete(ctx, id); err != nil {
				t.Fatal(err)
			}
			deleted = append(deleted, id)
			delete(files, id)
		}
	}
	// ec.vacuum plans from the master's view, which learns the deletes
	// from the holders' next heartbeats.
	testutil.WaitFor(t, 10*time.Second, func() bool {
		v, err := sh.fetchView(ctx)
		if err != nil {
			return false
		}
		for _, e := range v.ecShards()[st.id] {
			if e.GetDeleteCount() < uint64(len(deleted)) {
				return false
			}
		}
		return true
	}, "the master to see the %d deletes", len(deleted))
	got := mustRun(t, sh, out, "ec.vacuum -collection=ec")
	wantLines(t, got, fmt.Sprintf("volume %d: %d of", st.id, len(deleted)), "plan: vacuum 1 EC volumes", "dry run")
	if err := run(t, sh, "ec.vacuum -collection=ec -force"); err == nil {
		t.Fatal("ec.vacuum -force ran without the admin lock")
	}
	got = mustRun(t, sh, out, "lock\nec.vacuum -collection=ec -force\nunlock")
	wantLines(t, got, "compacted", "done")
	vols, shards := ecShardCount(t, ctx, sh)
	if shards != vols*6 {
		t.Fatalf("after ec.vacuum: %d volumes, %d shards\n%s", vols, shards, got)
	}
	if after := size(); after >= before*3/4 {
		t.Fatalf("ec.vacuum left the shards at %d bytes (from %d)\n%s", after, before, got)
	}
	checkFiles(t, ctx, cl, files, "after ec.vacuum")
	for _, id := range deleted {
		if _, err := readAll(ctx, cl, id); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("read of %s, deleted before ec.vacuum: %v", id, err)
		}
	}
	live := 0
	for id := range files {
		if id.Volume == st.id {
			live++
		}
	}
	wantLines(t, mustRun(t, sh, out, "ec.vacuum -collection=ec"), fmt.Sprintf("volume %d: 0 of %d files deleted", st.id, live), "no EC volume to vacuum")
}

// TestECDecodeKeepsDeleteMissedByTarget: a delete that reached the other
// holders of an EC volume but not the server ec.decode builds the normal
// volume on (cut off from the holder that took it) is not lost: ec.decode
// merges the holders' journals into the target's before its switch, and
// the decoded volume answers 404 for the needle.
func TestECDecodeKeepsDeleteMissedByTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	c, _, sh, out, files := ecCluster(t, 40, 0, 0)
	var gone fid.FileID
	for id := range files {
		gone = id
		break
	}
	mustRun(t, sh, out, fmt.Sprintf("lock\nec.decode -volumeId=%d\nunlock", gone.Volume))
	_, rest, ok := strings.Cut(out.String(), "into a normal volume on ")
	if !ok {
		t.Fatalf("no plan:\n%s", out)
	}
	target, _, _ := strings.Cut(rest, ",")
	journaled := 0
	for _, vs := range c.Volume {
		if vs.VolumeServer().URL() == target {
			continue
		}
		if ev, ok := vs.VolumeServer().Store().EcVolume(gone.Volume); ok {
			if err := ev.Delete(gone.Key); err != nil {
				t.Fatal(err)
			}
			journaled++
		}
	}
	if journaled == 0 {
		t.Fatalf("no holder besides the target %s", target)
	}
	delete(files, gone)
	mustRun(t, sh, out, fmt.Sprintf("lock\nec.decode -volumeId=%d -force\nunlock", gone.Volume))
	if code, _, err := readFrom(target, gone); err != nil || code != http.StatusNotFound {
		t.Fatalf("decoded volume on %s answered %d (%v) for a needle the other holders had deleted\n%s", target, code, err, out)
	}
	for id, want := range files {
		if id.Volume != gone.Volume {
			continue
		}
		if code, got, err := readFrom(target, id); err != nil || code != 200 || !bytes.Equal(got, want) {
			t.Fatalf("read %s from the decoded volume: %d %v", id, code, err)
		}
	}
}

// TestECBalanceNewHolderCatchesUp: ec.balance copies a shard onto a server
// new to the volume; a delete made after the copy took the source's journal
// but before the master listed the new holder reached only the old holders
// (simulated by journaling it on them right after the copy). ec.balance
// merges their journals into the new holder once the master lists it, so
// the new holder answers 404 for the needle.
func TestECBalanceNewHolderCatchesUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	specs := []testcluster.VolumeSpec{{DataCenter: "dc1", Rack: "r1"}, {DataCenter: "dc1", Rack: "r1"},
		{DataCenter: "dc1", Rack: "r2"}, {DataCenter: "dc1", Rack: "r2"}}
	c := testcluster.Start(t, testcluster.Options{Volumes: specs, VolumeSizeLimit: 2 << 20, RunShell: RunScriptOn})
	ctx := context.Background()
	late := c.Volume[3]
	late.Stop()
	out := &testutil.Buffer{}
	sh, err := New(Config{Masters: c.MasterAddrs(), Out: out, Owner: "ec test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Close() })
	for deadline := time.Now().Add(20 * time.Second); ; {
		v, err := sh.fetchView(ctx)
		if err == nil && len(v.snapshot()) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the master still lists the stopped server")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cl, err := client.New(client.Config{Masters: c.MasterAddrs(), LookupTTL: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	files := map[fid.FileID][]byte{}
	for i := range 30 {
		data := bytes.Repeat([]byte{byte(i)}, 700+i*31)
		id, _, err := cl.PutBytes(ctx, client.AssignRequest{Collection: "ec"}, data, client.UploadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		files[id] = data
	}
	mustRun(t, sh, out, "lock\ncluster.configure -collection=ec -ec=4+2\nec.encode -collection=ec -fullPercent=0 -quietFor=0s -force\nunlock")
	late.Start(t)
	c.WaitForVolumeServers(4)
	newURL := late.VolumeServer().URL()
	gone := map[fid.FileID]bool{}
	testAfterShardCopy = func(vid uint32, to string) {
		if to != newURL {
			return
		}
		for id := range files {
			if id.Volume != vid || gone[id] {
				continue
			}
			for _, vs := range c.Volume[:3] {
				if ev, ok := vs.VolumeServer().Store().EcVolume(vid); ok {
					if err := ev.Delete(id.Key); err != nil {
						t.Error(err)
					}
				}
			}
			gone[id] = true
			return
		}
	}
	t.Cleanup(func() { testAfterShardCopy = nil })
	mustRun(t, sh, out, "lock\nec.balance -collection=ec -force\nunlock")
	if len(gone) == 0 {
		t.Fatalf("ec.balance moved no shard to the new server %s\n%s", newURL, out)
	}
	for id := range gone {
		if code, _, err := readFrom(newURL, id); err != nil || code != http.StatusNotFound {
			t.Fatalf("the new holder answered %d (%v) for %s, deleted before the master listed it\n%s", code, err, id, out)
		}
	}
}
