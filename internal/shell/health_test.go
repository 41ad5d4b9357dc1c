package shell

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/kelpfs/kelp/internal/pb/masterpb"
)

// statusMaster is the fake master with a ClusterStatus that reports
// unreachable volume servers and abandoned copies, as a real master does.
type statusMaster struct {
	*fakeMaster
	mu          sync.Mutex
	unreachable []string
	abandoned   map[uint32]string // volume id -> node URL
}

func (m *statusMaster) ClusterStatus(ctx context.Context, _ *masterpb.ClusterStatusRequest) (*masterpb.ClusterStatusResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	type server struct {
		URL              string    `json:"url"`
		Reachable        bool      `json:"reachable"`
		UnreachableSince time.Time `json:"unreachableSince,omitzero"`
		ProbeError       string    `json:"probeError,omitempty"`
	}
	type abandoned struct {
		VolumeID uint32 `json:"volumeId"`
		URL      string `json:"url"`
	}
	st := struct {
		PulseSeconds    float64     `json:"pulseSeconds"`
		VolumeServers   []server    `json:"volumeServers"`
		AbandonedCopies []abandoned `json:"abandonedCopies"`
	}{PulseSeconds: 5}
	for _, u := range m.unreachable {
		st.VolumeServers = append(st.VolumeServers, server{URL: u, UnreachableSince: time.Unix(1700000000, 0).UTC(), ProbeError: "connection refused"})
	}
	for id, u := range m.abandoned {
		st.AbandonedCopies = append(st.AbandonedCopies, abandoned{id, u})
	}
	b, err := json.Marshal(st)
	return &masterpb.ClusterStatusResponse{Json: b}, err
}

func startStatusFake(t *testing.T) (*fakeCluster, *statusMaster) {
	c := &fakeCluster{t: t}
	c.master = &fakeMaster{c: c, defaultRepl: "000", collRepl: map[string]string{}}
	sm := &statusMaster{fakeMaster: c.master, abandoned: map[uint32]string{}}
	port := serveGRPC(t, func(s *grpc.Server) { masterpb.RegisterMasterServer(s, sm) })
	c.addr = fmt.Sprintf("127.0.0.1:1.%d", port)
	return c, sm
}

// Issue 8: a server the master cannot reach counts as missing for the
// repair plan, copies abandoned by failed growth are left to the master, and
// copies that hold different files are reported as divergent.
func TestFixReplicationSeesUnreachableAbandonedAndDivergent(t *testing.T) {
	c, m := startStatusFake(t)
	a := c.addServer("dc1", "r1", 10)
	b := c.addServer("dc1", "r1", 10)
	cc := c.addServer("dc2", "r1", 10)
	d := c.addServer("dc2", "r1", 10)
	a.put(fakeVol{id: 1, replication: "100", size: 100, files: 1})
	d.put(fakeVol{id: 1, replication: "100", size: 100, files: 1})
	a.put(fakeVol{id: 2, replication: "001", size: 1000, files: 10, readOnly: true})
	b.put(fakeVol{id: 2, replication: "001", size: 800, files: 8, readOnly: true})
	d.put(fakeVol{id: 3, replication: "000", size: 100, files: 1})
	cc.put(fakeVol{id: 5, replication: "100"})
	m.mu.Lock()
	m.unreachable = []string{d.url}
	m.abandoned[5] = cc.url
	m.mu.Unlock()

	sh, out := newTestShell(t, c.addr, time.Minute)
	got := mustRun(t, sh, out, "volume.fix.replication")
	wantLines(t, got,
		"unreachable volume servers",
		d.url+"  since 2023-11-14T22:13:20Z: connection refused",
		fmt.Sprintf("copy volume 1 from %s to %s", a.url, cc.url),
		fmt.Sprintf("cannot fix volume 3: every copy is on an unreachable server (%s)", d.url),
		"divergent copies",
		"volume 2: copies differ (all copies read-only: they stay different until reconciled): ",
		a.url+": 10 files, 1000 live bytes, read-only",
		b.url+": 8 files, 800 live bytes, read-only",
	)
	for _, bad := range []string{"volume 5 from", "on " + d.url + " ("} {
		if strings.Contains(got, bad) {
			t.Errorf("plan has %q:\n%s", bad, got)
		}
	}

	got = mustRun(t, sh, out, "volume.list")
	wantLines(t, got, "Server "+d.url+"  volumes 2/10  UNREACHABLE since", "divergent copies (by their last heartbeats", "volume 2: copies differ")
}
