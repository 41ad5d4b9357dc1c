package master

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/topology"
)

// benchMaster is a master whose topology already has writable volumes, so
// the benchmarks measure the assign path only.
func benchMaster(b *testing.B) *Server {
	s := startMaster(b, b.TempDir())
	var vols []topology.Volume
	for id := uint32(1); id <= 7; id++ {
		vols = append(vols, topology.Volume{ID: id})
	}
	s.topo.UpdateNode(topology.NodeInfo{
		URL: "127.0.0.1:8080", DataCenter: "dc1", Rack: "r1",
		Disks: []topology.Disk{{Dir: "/d", MaxVolumes: 8, Volumes: vols}},
	}, time.Now().Add(time.Hour)) // not expired while the benchmark runs
	return s
}

// BenchmarkAssignHandler is the handler alone: parsing, picking, key
// reservation and JSON.
func BenchmarkAssignHandler(b *testing.B) {
	s := benchMaster(b)
	h := s.routes()
	req := httptest.NewRequest("GET", "/dir/assign", nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != 200 {
				b.Fatalf("assign: %d %s", w.Code, w.Body)
			}
		}
	})
}

// BenchmarkAssignHTTP goes through a real loopback HTTP connection with
// keep-alive, as `kelp benchmark` and clients do.
func BenchmarkAssignHTTP(b *testing.B) {
	s := benchMaster(b)
	url := "http://" + s.HTTPAddr() + "/dir/assign"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.ReportAllocs()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Get(url)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("assign: %d", resp.StatusCode)
			}
		}
	})
}
