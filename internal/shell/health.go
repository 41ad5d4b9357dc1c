package shell

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kelpfs/kelp/internal/pb/masterpb"
	"github.com/kelpfs/kelp/internal/pb/volumepb"
	"github.com/kelpfs/kelp/internal/topology"
)

// health is what the master's ClusterStatus says beyond the Topology
// answer: the volume servers it cannot reach (they heartbeat but fail its
// probes), the copies a failed growth left behind and the master deletes,
// and the pulse.
type health struct {
	unreachable map[string]string          // URL -> "since ...: probe error"
	abandoned   map[uint32]map[string]bool // volume id -> node URLs
	pulse       time.Duration
	// underReplicated: volumes of degraded collections some of whose copies
	// lack writes or are missing, and the master's healing progress.
	underReplicated []topology.VolumeDeficit
}

// fetchHealth asks the master. A master that cannot answer leaves the
// health empty with a warning: the commands still work on the topology.
func (s *Shell) fetchHealth(ctx context.Context) health {
	h := health{unreachable: map[string]string{}, abandoned: map[uint32]map[string]bool{}, pulse: 5 * time.Second}
	var resp *masterpb.ClusterStatusResponse
	err := s.conns.master(ctx, func(m masterpb.MasterClient) (err error) {
		resp, err = m.ClusterStatus(ctx, &masterpb.ClusterStatusRequest{})
		return err
	})
	var st struct {
		PulseSeconds  float64 `json:"pulseSeconds"`
		VolumeServers []struct {
			URL              string    `json:"url"`
			Reachable        *bool     `json:"reachable"` // absent from older masters: reachable
			UnreachableSince time.Time `json:"unreachableSince"`
			ProbeError       string    `json:"probeError"`
		} `json:"volumeServers"`
		AbandonedCopies []struct {
			VolumeID uint32 `json:"volumeId"`
			URL      string `json:"url"`
		} `json:"abandonedCopies"`
		UnderReplicated []topology.VolumeDeficit `json:"underReplicated"`
	}
	if err == nil {
		err = json.Unmarshal(resp.GetJson(), &st)
	}
	if err != nil {
		fmt.Fprintf(s.err, "warning: cluster status unavailable (%v): unreachable servers are not known\n", err)
		return h
	}
	if st.PulseSeconds > 0 {
		h.pulse = time.Duration(st.PulseSeconds * float64(time.Second))
	}
	for _, n := range st.VolumeServers {
		if n.Reachable != nil && !*n.Reachable {
			h.unreachable[n.URL] = fmt.Sprintf("since %s: %s", n.UnreachableSince.Format(time.RFC3339), n.ProbeError)
		}
	}
	h.underReplicated = st.UnderReplicated
	for _, c := range st.AbandonedCopies {
		if h.abandoned[c.VolumeID] == nil {
			h.abandoned[c.VolumeID] = map[string]bool{}
		}
		h.abandoned[c.VolumeID][c.URL] = true
	}
	return h
}

// printUnderReplicated lists the volumes the master is healing by itself.
func (h health) printUnderReplicated(s *Shell, collection string) {
	var ds []topology.VolumeDeficit
	for _, d := range h.underReplicated {
		if collection == "" || d.Collection == collection {
			ds = append(ds, d)
		}
	}
	if len(ds) == 0 {
		return
	}
	fmt.Fprintln(s.out, "under-replicated volumes (degraded write policy; the master catches their copies up by itself):")
	for _, d := range ds {
		behind := make([]string, len(d.Behind))
		for i, l := range d.Behind {
			behind[i] = l.URL
		}
		fmt.Fprintf(s.out, "  volume %d  good %d/%d [%s]", d.VolumeID, len(d.Good), d.Want, strings.Join(d.Good, ","))
		if len(behind) > 0 {
			fmt.Fprintf(s.out, "  catching up [%s]", strings.Join(behind, ","))
		}
		if d.Missing > 0 {
			fmt.Fprintf(s.out, "  missing %d", d.Missing)
		}
		fmt.Fprintf(s.out, "  copied %d  since %s  why: %s", d.Copied, d.Since.Format(time.RFC3339), d.Cause)
		if d.LastErr != "" {
			fmt.Fprintf(s.out, "  last error: %s", d.LastErr)
		}
		fmt.Fprintln(s.out)
	}
}

// printUnreachable lists the unreachable servers, if any.
func (h health) printUnreachable(s *Shell) {
	if len(h.unreachable) == 0 {
		return
	}
	fmt.Fprintln(s.out, "unreachable volume servers (they send heartbeats but the master cannot reach them; their copies count as missing and nothing is placed on them):")
	for _, u := range slices.Sorted(maps.Keys(h.unreachable)) {
		fmt.Fprintf(s.out, "  %s  %s\n", u, h.unreachable[u])
	}
}

// plannable is the snapshot the planners may act on: without the
// unreachable servers (their copies count as missing, and no step can reach
// them) and without the copies abandoned by failed growth (the master
// deletes them; copying one would resurrect an empty volume). It also
// returns the volumes all of whose copies are on unreachable servers.
func (h health) plannable(nodes []topology.NodeInfo) (out []topology.NodeInfo, stranded map[uint32][]string) {
	stranded = map[uint32][]string{}
	reachableCopy := map[uint32]bool{}
	for _, n := range nodes {
		if _, bad := h.unreachable[n.URL]; bad {
			for _, d := range n.Disks {
				for _, v := range d.Volumes {
					stranded[v.ID] = append(stranded[v.ID], n.URL)
				}
			}
			continue
		}
		for di := range n.Disks {
			d := &n.Disks[di]
			kept := d.Volumes[:0:0]
			for _, v := range d.Volumes {
				if h.abandoned[v.ID][n.URL] {
					d.MaxVolumes-- // the slot stays taken until the delete
					continue
				}
				kept = append(kept, v)
				reachableCopy[v.ID] = true
			}
			d.Volumes = kept
		}
		out = append(out, n)
	}
	for id := range stranded {
		if reachableCopy[id] {
			delete(stranded, id)
		}
	}
	return out, stranded
}

// divergentCopies finds the volumes whose copies differ by their last
// heartbeats, then asks each reachable copy of those for its counts now, so
// that a heartbeat taken mid-write does not count as a divergence.
func (s *Shell) divergentCopies(ctx context.Context, v *view, h health) []topology.Divergence {
	nodes := v.snapshot()
	recent := 2 * h.pulse
	cands := topology.FindDivergentCopies(nodes, time.Now(), recent)
	if len(cands) == 0 {
		return nil
	}
	check := map[uint32]bool{}
	for _, d := range cands {
		check[d.VolumeID] = true
	}
	for _, n := range nodes {
		if _, bad := h.unreachable[n.URL]; bad {
			continue // its last heartbeat is all there is
		}
		for _, d := range n.Disks {
			for i := range d.Volumes {
				vol := &d.Volumes[i]
				if !check[vol.ID] {
					continue
				}
				live, err := s.liveStatus(ctx, v, n.URL, vol.ID)
				if err != nil {
					fmt.Fprintf(s.err, "warning: volume %d on %s: %v (using its last heartbeat)\n", vol.ID, n.URL, err)
					continue
				}
				vol.FileCount, vol.Size, vol.DeletedBytes, vol.ReadOnly = live.GetFileCount(), live.GetSize(), live.GetDeletedBytes(), live.GetReadOnly()
			}
		}
	}
	return topology.FindDivergentCopies(nodes, time.Now(), recent)
}

// liveStatusTimeout bounds one VolumeStatus of the divergence check.
const liveStatusTimeout = 5 * time.Second

func (s *Shell) liveStatus(ctx context.Context, v *view, url string, id uint32) (*volumepb.VolumeStatusResponse, error) {
	vc, err := s.volumeClient(v, url)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, liveStatusTimeout)
	defer cancel()
	return vc.VolumeStatus(ctx, &volumepb.VolumeStatusRequest{VolumeId: id})
}

// printDivergent prints the divergent section of a report.
func printDivergent(s *Shell, ds []topology.Divergence, collection, source string) {
	var lines []string
	for _, d := range ds {
		if collection == "" || d.Collection == collection {
			lines = append(lines, "  "+d.String())
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(s.out, "divergent copies (%s; this command does not reconcile them):\n%s\n", source, strings.Join(lines, "\n"))
}
