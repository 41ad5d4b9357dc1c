package client

import (
	"testing"
	"time"
)

func urls(locs []Location) []string {
	var out []string
	for _, l := range locs {
		out = append(out, l.URL)
	}
	return out
}

func TestHealthOrder(t *testing.T) {
	var h healthTable
	now := time.Unix(1000, 0)
	locs := []Location{{URL: "a:1"}, {URL: "http://b:1"}, {URL: "c:1"}}
	check := func(want string, wantProbe int) {
		t.Helper()
		got, probe := h.order(locs, now)
		if s := urls(got); s[0]+" "+s[1]+" "+s[2] != want || len(probe) != wantProbe {
			t.Fatalf("order = %v, probes %v; want %s and %d probes", s, probe, want, wantProbe)
		}
	}
	check("a:1 http://b:1 c:1", 0) // nothing known: the lookup's order
	h.answered("a:1", time.Second, false)
	check("a:1 http://b:1 c:1", 0) // a slow write says nothing of reads
	h.answered("a:1", 50*time.Millisecond, true)
	h.answered("b:1", time.Millisecond, true)
	h.answered("c:1", 9*time.Millisecond, true)
	check("http://b:1 c:1 a:1", 0) // b and c in one latency class, a slower
	h.failed("b:1", now)
	check("c:1 a:1 http://b:1", 0) // a suspect goes last
	now = now.Add(probeAfterMin)
	check("c:1 a:1 http://b:1", 1) // and is probed once its pause is over
	check("c:1 a:1 http://b:1", 0) // one probe at a time
	h.probed("http://b:1", false, now)
	now = now.Add(probeAfterMin)
	check("c:1 a:1 http://b:1", 0) // the pause doubled
	now = now.Add(probeAfterMin)
	check("c:1 a:1 http://b:1", 1)
	h.probed("http://b:1", true, now)
	check("http://b:1 c:1 a:1", 0) // answered: healthy again
	if got, _ := h.order(locs[:1], now); len(got) != 1 {
		t.Fatal("one location")
	}
}
