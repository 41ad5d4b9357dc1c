package topology

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// simNode is the heartbeat of simulated node i: perNode volumes, ids
// i*perNode+1.., each a little fuller on every beat.
func simNode(i, perNode int, beat uint64) NodeInfo {
	vols := make([]Volume, perNode)
	for j := range vols {
		vols[j] = Volume{ID: uint32(i*perNode + j + 1), Size: beat * 1024, FileCount: beat}
	}
	return NodeInfo{
		URL: fmt.Sprintf("10.%d.%d.%d:8080", i>>16, (i>>8)&255, i&255), DataCenter: "dc" + strconv.Itoa(i%3),
		Rack: "r" + strconv.Itoa(i%50), Disks: []Disk{{Dir: "/d", MaxVolumes: perNode + 8, Volumes: vols}},
	}
}

func heapMiB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc) / (1 << 20)
}

// BenchmarkMasterSim is issue 16's master at scale, in process: 10,000
// volume servers with 100 volumes each (1,000,000 volumes) heartbeat into
// the topology while 1,000 requests/s (half assigns, half lookups) measure
// their latency. It reports the heap the topology holds, heartbeats/s
// processed, and the p99 of assign and lookup. KELP_SIM_NODES shrinks it.
// Run with -benchtime=1x; skipped in -short.
func BenchmarkMasterSim(b *testing.B) {
	if testing.Short() {
		b.Skip("the master simulation takes a minute")
	}
	nodes, perNode := 10000, 100
	if v, err := strconv.Atoi(os.Getenv("KELP_SIM_NODES")); err == nil && v > 0 {
		nodes = v
	}
	for b.Loop() {
		before := heapMiB()
		topo := New(Options{VolumeSizeLimit: 1 << 40})
		start := time.Now()
		for i := 0; i < nodes; i++ {
			topo.UpdateNode(simNode(i, perNode, 1), time.Now())
		}
		fill := time.Since(start)
		b.ReportMetric(heapMiB()-before, "heap-MiB")
		b.ReportMetric(float64(nodes)/fill.Seconds(), "first-heartbeats/s")

		// The most heartbeats/s the topology takes: two streams (the
		// master runs one goroutine per server's stream; they all take
		// the same lock) as fast as they go, for a second.
		var stop atomic.Bool
		var beats atomic.Int64
		var wg sync.WaitGroup
		beat := func(w, step int, pace time.Duration) {
			defer wg.Done()
			var tick *time.Ticker
			if pace > 0 {
				tick = time.NewTicker(pace)
				defer tick.Stop()
			}
			for i := w; !stop.Load(); i += step {
				if tick != nil {
					<-tick.C
				}
				topo.UpdateNode(simNode(i%nodes, perNode, uint64(2+i/nodes)), time.Now())
				beats.Add(1)
			}
		}
		satStart := time.Now()
		for w := 0; w < 2; w++ {
			wg.Add(1)
			go beat(w, 2, 0)
		}
		time.Sleep(time.Second) // a measurement window, not a wait for a condition
		stop.Store(true)
		wg.Wait()
		b.ReportMetric(float64(beats.Load())/time.Since(satStart).Seconds(), "max-heartbeats/s")

		// Then the cluster's real pace, every server once per 5 s pulse
		// (10,000 servers: 2,000 heartbeats/s, on 4 streams), while 1,000
		// requests/s, half assigns and half lookups, measure latency.
		stop.Store(false)
		beats.Store(0)
		const streams = 4
		pace := 5 * time.Second * streams / time.Duration(nodes)
		for w := 0; w < streams; w++ {
			wg.Add(1)
			go beat(w, streams, pace)
		}
		const rate, dur = 1000, 3 * time.Second
		var assignLat, lookupLat []time.Duration
		tick := time.NewTicker(time.Second / rate)
		hbStart := time.Now()
		for i := 0; time.Since(hbStart) < dur; i++ {
			<-tick.C
			t0 := time.Now()
			if i%2 == 0 {
				if _, err := topo.PickForAssign(LayoutKey{}, ""); err != nil {
					b.Fatal(err)
				}
				assignLat = append(assignLat, time.Since(t0))
			} else {
				if _, err := topo.Lookup(uint32(i*7919%(nodes*perNode) + 1)); err != nil {
					b.Fatal(err)
				}
				lookupLat = append(lookupLat, time.Since(t0))
			}
		}
		tick.Stop()
		stop.Store(true)
		wg.Wait()
		b.ReportMetric(float64(beats.Load())/time.Since(hbStart).Seconds(), "paced-heartbeats/s")
		b.ReportMetric(rssMiB(), "rss-MiB")
		b.ReportMetric(p99ms(assignLat), "assign-p99-ms")
		b.ReportMetric(p99ms(lookupLat), "lookup-p99-ms")
		runtime.KeepAlive(topo)
	}
}

func p99ms(d []time.Duration) float64 {
	slices.Sort(d)
	return float64(d[len(d)*99/100]) / 1e6
}

// rssMiB is the process's resident set (VmRSS), 0 where /proc is missing.
func rssMiB() float64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}
