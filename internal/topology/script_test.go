package topology

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/ttl"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/*.txt with the actual output")

// TestScripts runs testdata/*.txt. Each case is a command line, "----", and
// the expected output, separated from the next case by a blank line:
//
//	heartbeat url=a:1 dc=dc1 rack=r1 max=3 at=0 vols=1/000/100,2/001/0/ro
//	remove url=a:1
//	expire at=30 timeout=15
//	limit bytes=1000
//	pick repl=000 [coll=c] [ttl=3m] [dc=dc1]
//	lookup vid=1
//	plan repl=010 count=2 [dc=dc1]
//	register vid=5 repl=001 urls=a:1,b:1
//	fail vid=2 url=b:1 at=40
//	failures
//	layouts
//	nodes
//
// Run with -rewrite to record new output.
func TestScripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no scripts")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			topo := New(Options{VolumeSizeLimit: 1000, Intn: func(int) int { return 0 }})
			var out strings.Builder
			for _, block := range strings.Split(strings.TrimSpace(string(data)), "\n\n") {
				cmd, want, ok := strings.Cut(block, "\n----\n")
				if !ok {
					cmd, want, _ = strings.Cut(block, "\n----")
				}
				var comments string
				for strings.HasPrefix(cmd, "#") {
					line, rest, _ := strings.Cut(cmd, "\n")
					comments += line + "\n"
					cmd = rest
				}
				out.WriteString(comments)
				got := runCommand(t, topo, strings.TrimSpace(cmd))
				if !*rewrite && strings.TrimSpace(want) != strings.TrimSpace(got) {
					t.Errorf("%s\n got:\n%s\nwant:\n%s", cmd, got, want)
				}
				fmt.Fprintf(&out, "%s\n----\n%s\n\n", strings.TrimSpace(cmd), strings.TrimSpace(got))
			}
			if *rewrite {
				os.WriteFile(file, []byte(strings.TrimSpace(out.String())+"\n"), 0o644)
			}
		})
	}
}

func runCommand(t *testing.T, topo *Topology, line string) string {
	fields := strings.Fields(line)
	args := map[string]string{}
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		args[k] = v
	}
	num := func(k string) int {
		n, _ := strconv.Atoi(args[k])
		return n
	}
	at := func() time.Time { return time.Unix(int64(num("at")), 0).UTC() }
	key := func() LayoutKey {
		code, err := replication.Parse(args["repl"])
		if err != nil {
			t.Fatal(err)
		}
		tt, _ := ttl.Parse(args["ttl"])
		return LayoutKey{Collection: args["coll"], Replication: code, TTL: tt}
	}
	locs := func(ls []Location) string {
		var s []string
		for _, l := range ls {
			s = append(s, fmt.Sprintf("%s(%s/%s)", l.URL, l.DataCenter, l.Rack))
		}
		return strings.Join(s, " ")
	}
	switch fields[0] {
	case "heartbeat":
		d := Disk{Dir: "/d", MaxVolumes: num("max")}
		for _, v := range strings.Split(args["vols"], ",") {
			if v == "" {
				continue
			}
			p := strings.Split(v, "/")
			id, _ := strconv.Atoi(p[0])
			code, _ := replication.Parse(p[1])
			size, _ := strconv.Atoi(p[2])
			d.Volumes = append(d.Volumes, Volume{ID: uint32(id), Replication: code, Size: uint64(size), ReadOnly: len(p) > 3 && p[3] == "ro"})
		}
		m := topo.UpdateNode(NodeInfo{URL: args["url"], DataCenter: args["dc"], Rack: args["rack"], Disks: []Disk{d}}, at())
		return fmt.Sprintf("max volume id %d", m)
	case "remove":
		return fmt.Sprint(topo.RemoveNode(args["url"]))
	case "expire":
		return fmt.Sprintf("dropped %v", topo.ExpireNodes(at(), time.Duration(num("timeout"))*time.Second))
	case "limit":
		topo.SetVolumeSizeLimit(uint64(num("bytes")))
		return "ok"
	case "pick":
		a, err := topo.PickForAssign(key(), args["dc"])
		if err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprintf("volume %d at %s", a.VolumeID, locs(a.Locations))
	case "lookup":
		ls, err := topo.Lookup(uint32(num("vid")))
		if err != nil {
			return "error: " + err.Error()
		}
		return locs(ls)
	case "plan":
		plans, err := topo.PlanGrowth(key().Replication, num("count"), PlanOptions{DataCenter: args["dc"]})
		if err != nil {
			return "error: " + err.Error()
		}
		var s []string
		for _, p := range plans {
			s = append(s, locs(p.Locations))
		}
		return strings.Join(s, "\n")
	case "register":
		k := key()
		err := topo.RegisterVolume(Volume{ID: uint32(num("vid")), Collection: k.Collection, Replication: k.Replication, TTL: k.TTL}, newCopies(strings.Split(args["urls"], ",")))
		if err != nil {
			return "error: " + err.Error()
		}
		return "ok"
	case "fail":
		if err := topo.ReportFailure(uint32(num("vid")), args["url"], "write failed", args["unreachable"] == "true", at()); err != nil {
			return "error: " + err.Error()
		}
		return "ok"
	case "failures":
		var s []string
		for _, f := range topo.Failures() {
			s = append(s, fmt.Sprintf("volume %d copy %s at=%d", f.VolumeID, f.URL, f.At.Unix()))
		}
		return strings.Join(s, "\n")
	case "layouts":
		var s []string
		for _, l := range topo.Status().Layouts {
			s = append(s, fmt.Sprintf("%q %s %q volumes=%v writable=%v", l.Collection, l.Replication, l.TTL, l.Volumes, l.Writable))
		}
		return strings.Join(s, "\n")
	case "nodes":
		var s []string
		for _, n := range topo.Nodes(false) {
			s = append(s, fmt.Sprintf("%s %s/%s volumes=%d max=%d free=%d seen=%d", n.URL, n.DataCenter, n.Rack, n.Volumes, n.MaxVolumes, n.FreeSlots, n.LastHeartbeat.Unix()))
		}
		return strings.Join(s, "\n")
	}
	t.Fatalf("unknown command %q", line)
	return ""
}

func newCopies(urls []string) []NewCopy {
	out := make([]NewCopy, len(urls))
	for i, u := range urls {
		out[i] = NewCopy{URL: u}
	}
	return out
}
