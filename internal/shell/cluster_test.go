package shell

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/testcluster"
	"github.com/kelpfs/kelp/internal/testutil"
)

// The scenario on a real cluster: volumes written under 001 are
// reconfigured to 100 and fixed with volume.fix.replication -force; their
// copies end in two data centers, the misplaced ones are removed, and every
// file stays readable while it happens.
func TestClusterFixReplication001To100(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	var specs []testcluster.VolumeSpec
	for _, dc := range []string{"dc1", "dc2"} {
		for _, rack := range []string{"r1", "r2"} {
			specs = append(specs, testcluster.VolumeSpec{DataCenter: dc, Rack: rack}, testcluster.VolumeSpec{DataCenter: dc, Rack: rack})
		}
	}
	c := testcluster.Start(t, testcluster.Options{Volumes: specs, PulseInterval: 500 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	cl, err := client.New(client.Config{Masters: c.MasterAddrs(), LookupTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	files := map[fid.FileID][]byte{}
	vids := map[uint32]bool{}
	for i := range 40 {
		data := fmt.Appendf(nil, "file %d %s", i, strings.Repeat("x", i*37))
		id, _, err := cl.PutBytes(ctx, client.AssignRequest{Replication: "001", Collection: "fix"}, data, client.UploadOptions{})
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		files[id] = data
		vids[id.Volume] = true
	}

	out := &testutil.Buffer{}
	sh, err := New(Config{Masters: c.MasterAddrs(), Out: out, Owner: "cluster test"})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	script := "lock\n"
	for vid := range vids {
		script += fmt.Sprintf("volume.configure.replication -volumeId %d -replication 100\n", vid)
	}
	if err := sh.RunScript(ctx, strings.NewReader(script)); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// The master learns the new codes from heartbeats.
	waitFor(t, func() bool {
		v, err := sh.fetchView(ctx)
		if err != nil {
			return false
		}
		for vid := range vids {
			if v.anyCopy(vid).GetReplication() != "100" {
				return false
			}
		}
		return true
	})

	// Read every file over and over while the fix runs.
	var reads, readErrs atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			for id, want := range files {
				select {
				case <-stop:
					return
				default:
				}
				got, err := readFile(ctx, cl, id)
				reads.Add(1)
				if err == nil && !bytes.Equal(got, want) {
					err = fmt.Errorf("%s: content differs", id)
				}
				if err != nil {
					readErrs.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}
	})
	out.Reset()
	err = sh.RunScript(ctx, strings.NewReader("volume.fix.replication -force\nunlock\n"))
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("fix: %v\n%s", err, out)
	}
	t.Logf("fix output:\n%s", out)
	t.Logf("%d reads during the fix", reads.Load())
	if reads.Load() < int64(len(files)) {
		t.Errorf("only %d reads during the fix", reads.Load())
	}
	if readErrs.Load() > 0 {
		t.Errorf("%d of %d reads failed during the fix; first: %v", readErrs.Load(), reads.Load(), firstErr.Load())
	}
	if !strings.Contains(out.String(), "(100%)") || !strings.Contains(out.String(), "applied ") {
		t.Errorf("fix output lacks progress or summary:\n%s", out)
	}

	// Every volume ends with exactly two copies, in two data centers.
	waitFor(t, func() bool {
		v, err := sh.fetchView(ctx)
		if err != nil {
			return false
		}
		for vid := range vids {
			h := v.holders(vid)
			if len(h) != 2 || v.dcOf[h[0]][0] == v.dcOf[h[1]][0] {
				return false
			}
		}
		return true
	})
	out.Reset()
	if err := sh.RunScript(ctx, strings.NewReader("volume.fix.replication")); err != nil || !strings.Contains(out.String(), "every volume that can be fixed satisfies its replication") {
		t.Fatalf("second fix: %v\n%s", err, out)
	}
	for id, want := range files {
		got, err := readFile(ctx, cl, id)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("after fix %s: %v", id, err)
		}
	}
}

func readFile(ctx context.Context, cl *client.Client, id fid.FileID) ([]byte, error) {
	rc, _, err := cl.Get(ctx, id, nil)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 15s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A scripted session against a real cluster: listing, locking, marking.
func TestClusterScriptedSession(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{DataCenter: "dc1", Rack: "r1"}, {DataCenter: "dc1", Rack: "r2"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.New(client.Config{Masters: c.MasterAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := cl.PutBytes(ctx, client.AssignRequest{Collection: "docs"}, []byte("hello"), client.UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := &testutil.Buffer{}
	sh, err := New(Config{Masters: c.MasterAddrs(), Out: out})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	err = sh.RunScript(ctx, strings.NewReader(fmt.Sprintf(
		"volume.list\ncollection.list\ncluster.status\nlock\nvolume.mark -volumeId %d -readonly\nvolume.mark -volumeId %d -writable\ncluster.configure -replication 010\nunlock\n",
		id.Volume, id.Volume)))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got := out.String()
	for _, want := range []string{"DataCenter dc1", "Rack r1", "Rack r2", fmt.Sprintf("volume %d  replication 000", id.Volume),
		`collection "docs": `, "admin lock acquired", fmt.Sprintf("volume %d on ", id.Volume), ": read-only", ": writable", "default replication: 010", "admin lock released"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if !slices.ContainsFunc(strings.Split(got, "\n"), func(l string) bool { return strings.Contains(l, `"leader"`) || strings.Contains(l, `"masters"`) }) {
		t.Errorf("cluster.status shows no master:\n%s", got)
	}
}
