package testcluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/testcluster"
	"github.com/kelpfs/kelp/internal/testutil"
)

// twoDataCenters is check 08's topology: 4 volume servers, 2 per data center.
func twoDataCenters() []testcluster.VolumeSpec {
	return []testcluster.VolumeSpec{
		{DataCenter: "dc1", Rack: "r1", MaxVolumes: 20}, {DataCenter: "dc1", Rack: "r2", MaxVolumes: 20},
		{DataCenter: "dc2", Rack: "r1", MaxVolumes: 20}, {DataCenter: "dc2", Rack: "r2", MaxVolumes: 20},
	}
}

// configure takes the admin lock on the master at addr, applies each
// /cluster/configure form and releases the lock.
func configure(t *testing.T, addr string, forms ...url.Values) {
	t.Helper()
	var lock struct {
		Token uint64 `json:"token"`
	}
	postJSON(t, "http://"+addr+"/admin/lock", url.Values{"owner": {t.Name()}}, http.StatusOK, &lock)
	for _, f := range forms {
		f.Set("token", fmt.Sprint(lock.Token))
		postJSON(t, "http://"+addr+"/cluster/configure", f, http.StatusOK, nil)
	}
	postJSON(t, "http://"+addr+"/admin/unlock", url.Values{"owner": {t.Name()}, "token": {fmt.Sprint(lock.Token)}}, http.StatusOK, nil)
}

func postJSON(t *testing.T, u string, form url.Values, want int, v any) {
	t.Helper()
	resp, err := http.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("POST %s %v: %s: %s", u, form, resp.Status, b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("POST %s: %v: %s", u, err, b)
		}
	}
}

// masterStatus is the part of /cluster/status these tests read.
type masterStatus struct {
	VolumeServers []struct {
		URL string `json:"url"`
	} `json:"volumeServers"`
	WritePolicy     map[string]string `json:"writePolicy"`
	UnderReplicated []struct {
		VolumeID uint32    `json:"volumeId"`
		Cause    string    `json:"cause"`
		Good     []string  `json:"good"`
		Since    time.Time `json:"since"`
		Grown    bool      `json:"grownShort"`
	} `json:"underReplicated"`
	Healed struct {
		NeedlesCopied  uint64 `json:"needlesCopied"`
		CopiesCaughtUp uint64 `json:"copiesCaughtUp"`
	} `json:"healed"`
}

// dump is the master's /cluster/status, for failure messages.
func dump(m string) string {
	resp, err := http.Get("http://" + m + "/cluster/status")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// waitServers waits until the master at m knows n volume servers: a write
// assigned to a server that is gone, before the master noticed, fails and
// the client's retries may meet it again.
func waitServers(t *testing.T, m string, n int) {
	t.Helper()
	testutil.WaitFor(t, 20*time.Second, func() bool { return len(clusterStatus(t, m).VolumeServers) == n },
		"the master did not notice the lost volume servers")
}

func clusterStatus(t *testing.T, addr string) masterStatus {
	t.Helper()
	var st masterStatus
	resp, err := http.Get("http://" + addr + "/cluster/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestDataCenterLossDegradedWritesHealByThemselves is issue 12's story:
// replication 100 over two data centers, dc2 lost. Collection "deg" (write
// policy degraded) goes on taking writes and deletes on dc1 alone; collection
// "str" (strict) refuses with a 503 naming the missing data center. When dc2
// returns, with no command typed and no restart, every "deg" volume gets its
// dc2 copy back level: the files written meanwhile are there byte for byte,
// the deletes made meanwhile too, and only those needles were copied.
func TestDataCenterLossDegradedWritesHealByThemselves(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Volumes: twoDataCenters(), PulseInterval: 500 * time.Millisecond})
	m := c.Leader().Addr
	configure(t, m,
		url.Values{"collection": {"deg"}, "replication": {"100"}, "writePolicy": {"degraded"}, "minCopies": {"1"}},
		url.Values{"collection": {"str"}, "replication": {"100"}, "writePolicy": {"strict"}})
	if st := clusterStatus(t, m); st.WritePolicy["deg"] != "degraded:1" || st.WritePolicy["str"] != "strict" {
		t.Fatalf("write policies in /cluster/status: %v", st.WritePolicy)
	}
	cl, err := client.New(client.Config{Masters: c.MasterAddrs(), MasterWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	deg := client.AssignRequest{Collection: "deg"}
	before := map[fid.FileID][]byte{}
	for i := range 6 {
		body := []byte(fmt.Sprintf("before the loss %d", i))
		id, _, err := cl.PutBytes(ctx, deg, body, client.UploadOptions{})
		if err != nil {
			t.Fatalf("write with both data centers up: %v", err)
		}
		before[id] = body
	}
	if _, _, err := cl.PutBytes(ctx, client.AssignRequest{Collection: "str"}, []byte("strict"), client.UploadOptions{}); err != nil {
		t.Fatalf("strict write with both data centers up: %v", err)
	}

	c.StopDataCenter("dc2")
	waitServers(t, m, 2)
	written := map[fid.FileID][]byte{}
	var last error
	testutil.WaitFor(t, 20*time.Second, func() bool {
		body := []byte("while dc2 was down, first")
		id, _, err := cl.PutBytes(ctx, deg, body, client.UploadOptions{})
		if err == nil {
			written[id] = body
		}
		if err != nil && (last == nil || err.Error() != last.Error()) {
			t.Logf("degraded write without dc2: %v", err)
		}
		last = err
		return err == nil
	}, "no degraded write succeeded after losing dc2: %v", dump(m))
	for i := range 29 {
		body := bytes.Repeat([]byte(fmt.Sprintf("while dc2 was down %d;", i)), 50+i)
		id, _, err := cl.PutBytes(ctx, deg, body, client.UploadOptions{})
		if err != nil {
			t.Fatalf("degraded write %d without dc2: %v", i, err)
		}
		written[id] = body
	}
	var deleted []fid.FileID
	for id := range before {
		if len(deleted) == 2 {
			break
		}
		if err := cl.Delete(ctx, id); err != nil {
			t.Fatalf("degraded delete of %s without dc2: %v", id, err)
		}
		deleted = append(deleted, id)
		delete(before, id)
	}
	if st := clusterStatus(t, m); len(st.UnderReplicated) == 0 {
		t.Fatal("/cluster/status lists no under-replicated volume while dc2 is down")
	} else {
		t.Logf("under-replicated: volume %d: %s", st.UnderReplicated[0].VolumeID, st.UnderReplicated[0].Cause)
	}

	// Strict: a 503 that names the missing data center (a leader elected
	// moments ago answers a 503 of its own first).
	var refusal string
	testutil.WaitFor(t, 10*time.Second, func() bool {
		resp, err := http.Get("http://" + m + "/dir/assign?collection=str")
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		refusal = resp.Status + ": " + string(msg)
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("strict assign without dc2: %s; want a 503", refusal)
		}
		return strings.Contains(string(msg), "dc2")
	}, "strict assign without dc2 never named dc2")
	t.Logf("strict refusal: %s", refusal)

	copiedBefore := clusterStatus(t, m).Healed.NeedlesCopied
	t0 := time.Now()
	c.StartDataCenter("dc2")
	dc2 := map[string]bool{}
	for _, n := range c.VolumesIn("dc2", "") {
		dc2[n.Addr] = true
	}
	var why string
	healed := func() bool {
		if len(clusterStatus(t, m).UnderReplicated) > 0 {
			resp, err := http.Get("http://" + m + "/cluster/status")
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				why = string(b)
			}
			return false
		}
		why = "files"
		check := func(id fid.FileID, want []byte) bool {
			locs, err := cl.Lookup(ctx, id.Volume)
			cl.Invalidate(id.Volume)
			if err != nil {
				return false
			}
			in := 0
			for _, l := range locs {
				if !dc2[l.URL] {
					continue
				}
				in++
				status, got, err := readFrom(l.URL, id)
				if err != nil || (want != nil && (status != http.StatusOK || !bytes.Equal(got, want))) || (want == nil && status != http.StatusNotFound) {
					return false
				}
			}
			return in == 1
		}
		for id, body := range written {
			if !check(id, body) {
				return false
			}
		}
		for id, body := range before {
			if !check(id, body) {
				return false
			}
		}
		for _, id := range deleted {
			if !check(id, nil) {
				return false
			}
		}
		return true
	}
	if !testutil.Eventually(60*time.Second, healed) {
		t.Fatalf("the dc2 copies did not catch up within 60s of dc2's return: %s", why)
	}
	t.Logf("healed %v after dc2 returned", time.Since(t0).Round(10*time.Millisecond))
	st := clusterStatus(t, m)
	if got, want := st.Healed.NeedlesCopied-copiedBefore, uint64(len(written)+len(deleted)); got != want {
		t.Errorf("catch-up copied %d needles and deletes, want exactly the %d made while dc2 was down", got, want)
	}
	// Writable on both data centers again: a write lands on a dc2 copy too.
	id, _, err := cl.PutBytes(ctx, deg, []byte("after"), client.UploadOptions{})
	if err != nil {
		t.Fatalf("write after healing: %v", err)
	}
	locs, _ := cl.Lookup(ctx, id.Volume)
	if len(locs) != 2 {
		t.Fatalf("volume %d has %d copies after healing: %+v", id.Volume, len(locs), locs)
	}
	for _, l := range locs {
		if status, got, _ := readFrom(l.URL, id); status != http.StatusOK || string(got) != "after" {
			t.Fatalf("write after healing: copy on %s answers %d %q", l.URL, status, got)
		}
	}
	// The strict volumes come back too, once the failure marks that the
	// degraded writes' failed forwards left on dc2's servers cool down.
	testutil.WaitFor(t, 30*time.Second, func() bool {
		_, _, err := cl.PutBytes(ctx, client.AssignRequest{Collection: "str"}, []byte("strict again"), client.UploadOptions{})
		return err == nil
	}, "no strict write succeeded within 30s of dc2's return")
}

// TestLostServerReplacedByItself: a dc2 server holding copies of a degraded
// collection is lost for good. After Config.ReplaceAfter the leader places
// a replacement copy on the other dc2 server (the only place replication 100
// allows), catches it up with the writes made meanwhile, and the volumes are
// whole again, with no command typed.
func TestLostServerReplacedByItself(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Volumes: twoDataCenters(), PulseInterval: 500 * time.Millisecond, ReplaceAfter: 500 * time.Millisecond})
	m := c.Leader().Addr
	configure(t, m, url.Values{"collection": {"deg"}, "replication": {"100"}, "writePolicy": {"degraded"}})
	cl, err := client.New(client.Config{Masters: c.MasterAddrs(), MasterWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	deg := client.AssignRequest{Collection: "deg"}
	files := map[fid.FileID][]byte{}
	for i := range 6 {
		body := []byte(fmt.Sprintf("before %d", i))
		id, _, err := cl.PutBytes(ctx, deg, body, client.UploadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		files[id] = body
	}
	var first fid.FileID
	for id := range files {
		first = id
		break
	}
	locs, err := cl.Lookup(ctx, first.Volume)
	if err != nil {
		t.Fatal(err)
	}
	var lost *testcluster.Node
	for _, n := range c.VolumesIn("dc2", "") {
		for _, l := range locs {
			if l.URL == n.Addr {
				lost = n
			}
		}
	}
	if lost == nil {
		t.Fatalf("volume %d has no dc2 copy: %+v", first.Volume, locs)
	}
	lost.Stop()
	waitServers(t, m, 3)
	testutil.WaitFor(t, 20*time.Second, func() bool {
		body := []byte("while a dc2 server is gone")
		id, _, err := cl.PutBytes(ctx, deg, body, client.UploadOptions{})
		if err == nil {
			files[id] = body
		}
		return err == nil
	}, "no degraded write succeeded after losing a dc2 server")
	for i := range 10 {
		body := []byte(fmt.Sprintf("after the loss %d", i))
		id, _, err := cl.PutBytes(ctx, deg, body, client.UploadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		files[id] = body
	}
	t0 := time.Now()
	var why string
	ok := testutil.Eventually(60*time.Second, func() bool {
		if st := clusterStatus(t, m); len(st.UnderReplicated) > 0 {
			resp, err := http.Get("http://" + m + "/cluster/status")
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				why = "under-replicated: " + string(b)
			}
			return false
		}
		for id, body := range files {
			cl.Invalidate(id.Volume)
			locs, err := cl.Lookup(ctx, id.Volume)
			if err != nil || len(locs) != 2 {
				why = fmt.Sprintf("%s: %+v %v", id, locs, err)
				return false
			}
			for _, l := range locs {
				if l.URL == lost.Addr {
					why = fmt.Sprintf("%s still on the lost server", id)
					return false
				}
				if status, got, err := readFrom(l.URL, id); err != nil || status != http.StatusOK || !bytes.Equal(got, body) {
					why = fmt.Sprintf("%s on %s: %d %v", id, l.URL, status, err)
					return false
				}
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("the volumes of the lost server did not get replacement copies: %s", why)
	}
	t.Logf("replaced %v after the writes", time.Since(t0).Round(10*time.Millisecond))
}

// TestDegradedCollectionGrowsWithADataCenterDown: a degraded collection
// with replication 100 and no volume yet (or all of them full) grows while
// dc2 is down: the new volumes get their dc1 copy, take writes and are
// listed as under-replicated from the start; when dc2 returns each gets its
// dc2 copy by itself (well before ReplaceAfter, which is the default 5
// minutes here: the missing copies never existed) holding every file.
// Under strict the same growth fails.
func TestDegradedCollectionGrowsWithADataCenterDown(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Volumes: twoDataCenters(), PulseInterval: 500 * time.Millisecond})
	m := c.Leader().Addr
	configure(t, m,
		url.Values{"collection": {"grow"}, "replication": {"100"}, "writePolicy": {"degraded"}},
		url.Values{"collection": {"str"}, "replication": {"100"}, "writePolicy": {"strict"}})
	dc2 := c.VolumesIn("dc2", "")
	for _, n := range dc2 {
		n.Stop()
	}
	waitServers(t, m, 2)
	cl, err := client.New(client.Config{Masters: c.MasterAddrs(), MasterWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, _, err := cl.PutBytes(ctx, client.AssignRequest{Collection: "str"}, []byte("x"), client.UploadOptions{}); err == nil {
		t.Fatal("a strict replication-100 collection grew a volume without dc2")
	}
	files := map[fid.FileID][]byte{}
	for i := range 10 {
		body := []byte(fmt.Sprintf("written while dc2 is down %d", i))
		id, _, err := cl.PutBytes(ctx, client.AssignRequest{Collection: "grow"}, body, client.UploadOptions{})
		if err != nil {
			t.Fatalf("write %d to the degraded collection without dc2: %v", i, err)
		}
		files[id] = body
	}
	short := map[uint32]bool{}
	for _, d := range clusterStatus(t, m).UnderReplicated {
		if d.Grown {
			short[d.VolumeID] = true
		}
	}
	for id := range files {
		if !short[id.Volume] {
			t.Fatalf("volume %d is not listed as created short: %s", id.Volume, dump(m))
		}
	}
	for _, n := range dc2 {
		n.Start(t)
	}
	dc2URL := map[string]bool{}
	for _, n := range dc2 {
		dc2URL[n.Addr] = true
	}
	var why string
	ok := testutil.Eventually(60*time.Second, func() bool {
		for _, d := range clusterStatus(t, m).UnderReplicated {
			if short[d.VolumeID] {
				why = fmt.Sprintf("volume %d still under-replicated: %s", d.VolumeID, dump(m))
				return false
			}
		}
		for id, body := range files {
			cl.Invalidate(id.Volume)
			locs, err := cl.Lookup(ctx, id.Volume)
			if err != nil || len(locs) != 2 {
				why = fmt.Sprintf("%s: %+v %v", id, locs, err)
				return false
			}
			for _, l := range locs {
				if !dc2URL[l.URL] {
					continue
				}
				if status, got, err := readFrom(l.URL, id); err != nil || status != http.StatusOK || !bytes.Equal(got, body) {
					why = fmt.Sprintf("%s on the dc2 copy %s: %d %v", id, l.URL, status, err)
					return false
				}
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("the volumes grown while dc2 was down did not get their dc2 copies: %s", why)
	}
}
