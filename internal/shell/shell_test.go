package shell

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/testutil"
)

func newTestShell(t *testing.T, masters string, lease time.Duration) (*Shell, *testutil.Buffer) {
	t.Helper()
	out := &testutil.Buffer{}
	sh, err := New(Config{Masters: []string{masters}, Out: out, Owner: "test shell", LockLease: lease})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Close() })
	return sh, out
}

func run(t *testing.T, sh *Shell, script string) error {
	t.Helper()
	return sh.RunScript(context.Background(), strings.NewReader(script))
}

func mustRun(t *testing.T, sh *Shell, out *testutil.Buffer, script string) string {
	t.Helper()
	out.Reset()
	if err := run(t, sh, script); err != nil {
		t.Fatalf("%q: %v\noutput:\n%s", script, err, out)
	}
	return out.String()
}

func wantLines(t *testing.T, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("output lacks %q:\n%s", w, got)
		}
	}
}

func TestSplitCommands(t *testing.T) {
	got := splitCommands("lock; volume.mark -volumeId 3 -readonly\n# comment; not a command\ncollection.delete -collection 'a b';;unlock # bye")
	want := [][]string{{"lock"}, {"volume.mark", "-volumeId", "3", "-readonly"}, {"collection.delete", "-collection", "a b"}, {"unlock"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("got %q", got)
	}
}

func TestParseMasters(t *testing.T) {
	ms, err := parseMasters([]string{"m1:9333, m2:9334.19999"})
	if err != nil || len(ms) != 2 || ms[0].grpc != "m1:19333" || ms[1].grpc != "m2:19999" || ms[1].http != "m2:9334" {
		t.Fatalf("%+v %v", ms, err)
	}
	for _, bad := range []string{"", "nohost", "h:x.1", "h:1.y"} {
		if _, err := parseMasters([]string{bad}); !errors.Is(err, ErrUsage) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestHelpAndUsage(t *testing.T) {
	c := startFake(t)
	sh, out := newTestShell(t, c.addr, 0)
	got := mustRun(t, sh, out, "help")
	for _, name := range []string{"lock", "unlock", "cluster.status", "cluster.configure", "volume.list", "volume.configure.replication",
		"volume.fix.replication", "volume.balance", "volume.vacuum", "volume.mark", "volume.move", "volume.delete", "collection.list", "collection.delete"} {
		if !strings.Contains(got, "  "+name+" ") {
			t.Errorf("help lacks %s:\n%s", name, got)
		}
	}
	got = mustRun(t, sh, out, "volume.mark -h")
	wantLines(t, got, "volume.mark: mark a volume", "-volumeId", "-readonly", "-writable")
	got = mustRun(t, sh, out, "help volume.move")
	wantLines(t, got, "-source", "-target")

	if err := run(t, sh, "volume.bogus"); !errors.Is(err, ErrUnknownCommand) || !errors.Is(err, ErrScriptFailed) {
		t.Fatalf("unknown command: %v", err)
	}
	if err := run(t, sh, "volume.mark -nope"); !errors.Is(err, ErrUsage) {
		t.Fatalf("bad flag: %v", err)
	}
	if err := run(t, sh, "volume.list extra"); !errors.Is(err, ErrUsage) {
		t.Fatalf("extra argument: %v", err)
	}
}

func TestScriptStopsAtFirstFailure(t *testing.T) {
	c := startFake(t)
	sh, out := newTestShell(t, c.addr, 0)
	err := run(t, sh, "volume.list\nvolume.mark -volumeId 1 -readonly\nvolume.list\n")
	if !errors.Is(err, ErrNotLocked) || !errors.Is(err, ErrScriptFailed) {
		t.Fatalf("err = %v", err)
	}
	if c.master.topoCalls != 1 {
		t.Fatalf("the script went on after the failure: %d topology calls", c.master.topoCalls)
	}
	wantLines(t, out.String(), "error: volume.mark: shell: this command changes the cluster and needs the admin lock; run `lock` first")
	if err := run(t, sh, "exit; volume.mark -volumeId 1 -readonly"); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

func TestLockUnlockAndRenewal(t *testing.T) {
	c := startFake(t)
	sh, out := newTestShell(t, c.addr, 300*time.Millisecond)
	other, _ := newTestShell(t, c.addr, 0)
	wantLines(t, mustRun(t, sh, out, "lock"), `admin lock acquired by "test shell"`)
	if err := run(t, other, "lock"); err == nil || !strings.Contains(err.Error(), `held by "test shell"`) {
		t.Fatalf("second lock: %v", err)
	}
	// The lease is renewed in the background, again and again, and the lock
	// stays ours (configure below needs it).
	renewals := func() int {
		c.master.mu.Lock()
		defer c.master.mu.Unlock()
		return c.master.renewals
	}
	if !testutil.Eventually(10*time.Second, func() bool { return renewals() >= 3 }) {
		t.Fatalf("%d renewals of a 300ms lease", renewals())
	}
	wantLines(t, mustRun(t, sh, out, "cluster.configure -replication 001 -collection pics"), "default replication: 000", `collection "pics" replication: 001`)
	wantLines(t, mustRun(t, sh, out, "unlock"), "admin lock released")
	if c.master.releases != 1 {
		t.Fatalf("releases = %d", c.master.releases)
	}
	if err := run(t, sh, "cluster.configure -replication 001"); !errors.Is(err, ErrNotLocked) {
		t.Fatalf("after unlock: %v", err)
	}
	// Another shell takes it over when our token is revoked: we notice.
	mustRun(t, sh, out, "lock")
	c.master.revoke()
	deadline := time.Now().Add(3 * time.Second)
	for sh.requireLock() == nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if err := run(t, sh, "cluster.configure -replication 010"); !errors.Is(err, ErrLockLost) {
		t.Fatalf("after revoke: %v", err)
	}
	if len(c.master.configured) != 1 {
		t.Fatalf("configure calls: %d", len(c.master.configured))
	}
}

// twoDCs is the cluster: 2 data centers x 2 racks x 2 servers, with
// volume 7 written under 001 (two copies in one rack), reconfigured to 100.
func twoDCs(t *testing.T) (*fakeCluster, []*fakeVolume) {
	c := startFake(t)
	var vs []*fakeVolume
	for _, dc := range []string{"dc1", "dc2"} {
		for _, rack := range []string{"r1", "r2"} {
			for range 2 {
				vs = append(vs, c.addServer(dc, rack, 8))
			}
		}
	}
	vs[0].put(fakeVol{id: 7, collection: "pics", replication: "001", size: 4096, files: 10})
	vs[1].put(fakeVol{id: 7, collection: "pics", replication: "001", size: 4096, files: 10})
	return c, vs
}

func TestVolumeListAndCollections(t *testing.T) {
	c, vs := twoDCs(t)
	vs[2].put(fakeVol{id: 8, replication: "000", size: 100, files: 1, readOnly: true})
	sh, out := newTestShell(t, c.addr, 0)
	got := mustRun(t, sh, out, "volume.list")
	wantLines(t, got, "Topology: volume size limit 30.0 MiB, default replication 000", "  DataCenter dc1\n    Rack r1\n      Server "+vs[0].url+"  volumes 1/8",
		"volume 7  replication 001  size 4.0 KiB  files 10  deleted 0 (0 B)  collection pics  writable",
		"volume 8  replication 000  size 100 B  files 1  deleted 0 (0 B)  read-only", "DataCenter dc2")
	if strings.Index(got, "DataCenter dc1") > strings.Index(got, "DataCenter dc2") {
		t.Errorf("data centers out of order:\n%s", got)
	}
	got = mustRun(t, sh, out, "collection.list")
	wantLines(t, got, "default collection: 1 volumes, 1 copies, 1 files, 100 B", `collection "pics": 1 volumes, 2 copies, 10 files, 4.0 KiB`)

	got = mustRun(t, sh, out, "collection.delete -collection pics")
	wantLines(t, got, "would delete volume 7 on "+vs[0].url, "would delete volume 7 on "+vs[1].url, "dry run")
	if _, ok := vs[0].get(7); !ok {
		t.Fatal("dry run deleted")
	}
	if err := run(t, sh, "collection.delete -collection pics -force"); !errors.Is(err, ErrNotLocked) {
		t.Fatalf("without lock: %v", err)
	}
	got = mustRun(t, sh, out, "lock; collection.delete -collection pics -force")
	wantLines(t, got, "deleted volume 7 on "+vs[0].url, "deleted volume 7 on "+vs[1].url)
	if _, ok := vs[1].get(7); ok {
		t.Fatal("volume 7 survived collection.delete")
	}
	if err := run(t, sh, "collection.delete -collection pics"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("empty collection: %v", err)
	}
	wantLines(t, mustRun(t, sh, out, "cluster.status"), `"leader": "127.0.0.1:1"`)
}

func TestFixReplicationOneRackToTwoDataCenters(t *testing.T) {
	c, vs := twoDCs(t)
	sh, out := newTestShell(t, c.addr, 0)
	got := mustRun(t, sh, out, "lock; volume.configure.replication -volumeId 7 -replication 100")
	wantLines(t, got, "volume 7 on "+vs[0].url+": replication 100", "volume 7 on "+vs[1].url+": replication 100")
	for _, v := range vs[:2] {
		if fv, _ := v.get(7); fv.replication != "100" {
			t.Fatalf("copy on %s has replication %q", v.url, fv.replication)
		}
	}
	// Dry run: the plan, and nothing changes. Which dc2 server receives the
	// copy and which dc1 copy goes depends on the (random) port order.
	got = mustRun(t, sh, out, "volume.fix.replication")
	wantLines(t, got, "plan (2 steps):", "dry run", "(copies in 1 data centers, replication 100 needs 2)")
	if strings.Count(got, "copy volume 7 from ") != 1 || strings.Count(got, "delete volume 7 on ") != 1 {
		t.Fatalf("plan:\n%s", got)
	}
	for _, v := range vs[2:] {
		if _, ok := v.get(7); ok {
			t.Fatal("dry run copied")
		}
	}
	got = mustRun(t, sh, out, "volume.fix.replication -force")
	wantLines(t, got, "[1/2] copy volume 7", "4.0 KiB of 4.0 KiB (100%)", "[2/2] delete volume 7 on ", "applied 2 steps")
	var holders []int
	for i, v := range vs {
		if fv, ok := v.get(7); ok {
			holders = append(holders, i)
			if fv.readOnly {
				t.Errorf("copy on server %d left read-only", i)
			}
		}
	}
	// One original copy in dc1 (servers 0-3) stays, one new copy in dc2 (4-7).
	if len(holders) != 2 || holders[0] > 1 || holders[1] < 4 {
		t.Fatalf("copies on servers %v, want one of 0/1 and one of 4-7\n%s", holders, got)
	}
	wantLines(t, mustRun(t, sh, out, "volume.fix.replication"), "every volume that can be fixed satisfies its replication")
}

func TestCopyInterruptedLeavesSourceIntactAndWritable(t *testing.T) {
	c, vs := twoDCs(t)
	vs[5].blockCopy = true
	sh, out := newTestShell(t, c.addr, 0)
	mustRun(t, sh, out, "lock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- sh.Exec(ctx, "volume.move -volumeId 7 -source "+vs[1].url+" -target "+vs[5].url) }()
	// Cancel once the copy is under way (the first progress line is out).
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "(50%)") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "Canceled") {
		t.Fatalf("err = %v\n%s", err, out)
	}
	for _, v := range vs[:2] {
		fv, ok := v.get(7)
		if !ok || fv.readOnly {
			t.Fatalf("copy on %s: present %v read-only %v\n%s", v.url, ok, fv.readOnly, out)
		}
	}
	if _, ok := vs[5].get(7); ok {
		t.Fatal("partial copy left on the target")
	}
	vs[5].mu.Lock()
	calls := slices.Clone(vs[5].calls)
	vs[5].mu.Unlock()
	if !slices.Contains(calls, "delete 7") {
		t.Fatalf("target calls %v: the partial copy was not cleaned up", calls)
	}
}

func TestMoveMarkDeleteVacuumBalance(t *testing.T) {
	c, vs := twoDCs(t)
	sh, out := newTestShell(t, c.addr, 0)
	mustRun(t, sh, out, "lock")
	got := mustRun(t, sh, out, "volume.move -volumeId 7 -source "+vs[1].url+" -target "+vs[2].url)
	wantLines(t, got, "warning: after the move, volume 7 breaks its placement", "volume 7 moved from "+vs[1].url+" to "+vs[2].url)
	if _, ok := vs[1].get(7); ok {
		t.Fatal("source kept its copy")
	}
	if fv, ok := vs[2].get(7); !ok || fv.readOnly || fv.files != 10 {
		t.Fatalf("target copy %+v %v", fv, ok)
	}
	mustRun(t, sh, out, "volume.mark -volumeId 7 -readonly")
	for _, v := range []*fakeVolume{vs[0], vs[2]} {
		if fv, _ := v.get(7); !fv.readOnly {
			t.Fatal("mark -readonly missed a copy")
		}
	}
	mustRun(t, sh, out, "volume.mark -volumeId 7 -writable -node "+vs[2].url)
	if fv, _ := vs[2].get(7); fv.readOnly {
		t.Fatal("mark -writable -node")
	}
	if err := run(t, sh, "volume.mark -volumeId 7"); !errors.Is(err, ErrUsage) {
		t.Fatalf("mark without state: %v", err)
	}
	wantLines(t, mustRun(t, sh, out, "volume.vacuum -garbageThreshold 0.6"), "below threshold", "vacuumed 0 copies")
	wantLines(t, mustRun(t, sh, out, "volume.vacuum -volumeId 7"), "garbage 50%, vacuumed 4.0 KiB -> 2.0 KiB", "vacuumed 2 copies")

	mustRun(t, sh, out, "volume.delete -volumeId 7 -node "+vs[2].url)
	if err := run(t, sh, "volume.delete -volumeId 7 -node "+vs[0].url); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "only copy") {
		t.Fatalf("deleting the last copy: %v", err)
	}
	if err := run(t, sh, "volume.delete -volumeId 99 -node "+vs[0].url); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown volume: %v", err)
	}

	// Balance: five single-copy volumes on one server spread out.
	for id := uint32(10); id < 15; id++ {
		vs[3].put(fakeVol{id: id, replication: "000", size: 10, files: 1})
	}
	got = mustRun(t, sh, out, "volume.balance")
	wantLines(t, got, "dry run")
	got = mustRun(t, sh, out, "volume.balance -force")
	wantLines(t, got, "applied")
	if n := len(vs[3].vols); n > 1 {
		t.Fatalf("server 3 still has %d volumes after balance:\n%s", n, got)
	}
	wantLines(t, mustRun(t, sh, out, "volume.balance"), "volumes are balanced")
}
