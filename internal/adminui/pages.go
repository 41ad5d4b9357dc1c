package adminui

import (
	"cmp"
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kelpfs/kelp/internal/master"
	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/topology"
)

var funcs = template.FuncMap{
	"bytes":   bytesString,
	"sbytes":  func(n int64) string { return bytesString(uint64(max(n, 0))) },
	"pct":     func(f float64) string { return strconv.FormatFloat(100*f, 'f', 0, 64) + "%" },
	"ago":     ago,
	"lower":   strings.ToLower,
	"join":    strings.Join,
	"add":     func(a, b int) int { return a + b },
	"queryOf": func(v url.Values) template.URL { return template.URL(v.Encode()) },
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

func bytesString(n uint64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatUint(n, 10) + " B"
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

func ago(now, t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return "now"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s ago"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m ago"
	default:
		return strconv.Itoa(int(d.Hours())) + "h ago"
	}
}

// statusTimeout bounds the status probes one page makes.
const statusTimeout = 2 * time.Second

func (u *UI) status(r *http.Request) master.ClusterStatus {
	ctx, cancel := context.WithTimeout(r.Context(), statusTimeout)
	defer cancel()
	return u.cfg.Source.ClusterStatus(ctx)
}

// peerRow is one master on the masters page.
type peerRow struct {
	master.PeerStatus
	Self    bool
	Healthy bool
}

func (u *UI) mastersPage(w http.ResponseWriter, r *http.Request, id identity) {
	cs := u.status(r)
	rows := make([]peerRow, len(cs.Peers))
	for i, p := range cs.Peers {
		rows[i] = peerRow{PeerStatus: p, Self: p.Address == cs.Self,
			Healthy: p.Error == "" && (p.Role == "leader" || p.Role == "follower")}
	}
	stale := 0
	now := u.cfg.Now()
	for _, n := range cs.VolumeServers {
		if staleNode(n, cs.PulseSeconds, now) {
			stale++
		}
	}
	u.render(w, r, http.StatusOK, "masters", id, "Masters", map[string]any{
		"Status": cs, "Peers": rows, "Servers": len(cs.VolumeServers), "Stale": stale,
	})
}

// staleNode: a server whose last heartbeat is more than 1.5 pulses old (the
// master drops it after 3), or that the master cannot reach.
func staleNode(n topology.NodeStatus, pulseSeconds float64, now time.Time) bool {
	if pulseSeconds <= 0 {
		pulseSeconds = 5
	}
	return !n.Reachable || now.Sub(n.LastHeartbeat) > time.Duration(1.5*pulseSeconds*float64(time.Second))
}

// diskRow / serverRow / rackRow / dcRow are the topology page's tree.
type diskRow struct {
	Dir        string
	Volumes    int
	EcShards   int
	MaxVolumes int
	FreeBytes  uint64
	Used       uint64 // bytes in volumes
	Fill       float64
}

type serverRow struct {
	topology.NodeStatus
	Stale bool
	Why   string
	Disks []diskRow
	Fill  float64
	Used  uint64
}

type rackRow struct {
	Name    string
	Servers []serverRow
}

type dcRow struct {
	Name  string
	Racks []rackRow
}

type topoView struct {
	DataCenters []dcRow
	Servers     int
	Stale       int
	Volumes     int
	Slots       int
}

func (u *UI) topoView(ts topology.Status, pulse float64) topoView {
	now := u.cfg.Now()
	var tv topoView
	for _, dc := range ts.DataCenters {
		d := dcRow{Name: dc.Name}
		for _, rk := range dc.Racks {
			rr := rackRow{Name: rk.Name}
			for _, n := range rk.Nodes {
				sr := serverRow{NodeStatus: n, Stale: staleNode(n, pulse, now)}
				if !n.Reachable {
					sr.Why = "unreachable since " + n.UnreachableSince.UTC().Format(time.TimeOnly) + ": " + n.ProbeError
				} else if sr.Stale {
					sr.Why = "no heartbeat for " + now.Sub(n.LastHeartbeat).Round(time.Second).String()
				}
				for _, dk := range n.Disks {
					dr := diskRow{Dir: dk.Dir, Volumes: len(dk.Volumes), MaxVolumes: dk.MaxVolumes, FreeBytes: dk.FreeBytes}
					for _, v := range dk.Volumes {
						dr.Used += v.Size
					}
					for _, e := range dk.EcShards {
						dr.EcShards += popcount(e.Shards)
					}
					if dk.MaxVolumes > 0 {
						dr.Fill = min(1, float64(dr.Volumes)/float64(dk.MaxVolumes))
					}
					sr.Used += dr.Used
					sr.Disks = append(sr.Disks, dr)
				}
				if n.MaxVolumes > 0 {
					sr.Fill = min(1, float64(n.Volumes)/float64(n.MaxVolumes))
				}
				tv.Servers++
				tv.Volumes += n.Volumes
				tv.Slots += n.MaxVolumes
				if sr.Stale {
					tv.Stale++
				}
				rr.Servers = append(rr.Servers, sr)
			}
			d.Racks = append(d.Racks, rr)
		}
		tv.DataCenters = append(tv.DataCenters, d)
	}
	return tv
}

func popcount(x uint32) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

func (u *UI) pulse(r *http.Request) float64 { return u.cfg.Source.PulseSeconds() }

func (u *UI) topologyPage(w http.ResponseWriter, r *http.Request, id identity) {
	tv := u.topoView(u.cfg.Source.TopologyStatus(), u.pulse(r))
	u.render(w, r, http.StatusOK, "topology", id, "Topology", tv)
}

func (u *UI) topologySVG(w http.ResponseWriter, r *http.Request, id identity) {
	tv := u.topoView(u.cfg.Source.TopologyStatus(), u.pulse(r))
	w.Header().Set("Content-Type", "image/svg+xml")
	writeTopologySVG(w, tv)
}

// volumeRow is one volume on the volumes page: its copies summed up.
type volumeRow struct {
	ID          uint32
	Collection  string
	Replication string
	Want, Have  int
	Met         bool
	Size        uint64
	Files       uint64
	Deleted     uint64
	Garbage     float64
	ReadOnly    bool
	Servers     []string
}

// volumeQuery is the volumes page's filter and order, from the URL.
type volumeQuery struct {
	Collection string
	Server     string
	ReadOnly   string // "", "yes", "no"
	Unmet      bool
	MinGarbage float64
	Sort       string
	Desc       bool
	Page       int
}

const volumesPerPage = 100

var volumeSorts = []string{"id", "collection", "replication", "size", "files", "garbage", "copies"}

func parseVolumeQuery(q url.Values) (volumeQuery, error) {
	vq := volumeQuery{Collection: q.Get("collection"), Server: q.Get("server"), ReadOnly: q.Get("readonly"),
		Unmet: q.Get("unmet") != "", Sort: cmp.Or(q.Get("sort"), "id"), Desc: q.Get("desc") != "", Page: 1}
	if !slices.Contains(volumeSorts, vq.Sort) {
		return vq, fmt.Errorf("sort must be one of %s", strings.Join(volumeSorts, ", "))
	}
	switch vq.ReadOnly {
	case "", "yes", "no":
	default:
		return vq, fmt.Errorf("readonly must be yes or no")
	}
	if g := q.Get("garbage"); g != "" {
		f, err := strconv.ParseFloat(g, 64)
		if err != nil || f < 0 || f > 100 {
			return vq, fmt.Errorf("garbage must be a percentage 0 to 100")
		}
		vq.MinGarbage = f / 100
	}
	if p := q.Get("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return vq, fmt.Errorf("page must be a positive number")
		}
		vq.Page = n
	}
	return vq, nil
}

// volumeRows sums up the copies of every volume of the tree.
func volumeRows(ts topology.Status) []volumeRow {
	copies, maxID := 0, uint32(0)
	for _, dc := range ts.DataCenters {
		for _, rk := range dc.Racks {
			for _, n := range rk.Nodes {
				for _, d := range n.Disks {
					copies += len(d.Volumes)
					for _, v := range d.Volumes {
						maxID = max(maxID, v.ID)
					}
				}
			}
		}
	}
	// Volume ids are dense in practice: index rows by id in a slice, a map
	// only when they are not.
	var dense []int32
	var sparse map[uint32]int
	if uint64(maxID) <= 4*uint64(copies)+1024 {
		dense = make([]int32, maxID+1)
	} else {
		sparse = make(map[uint32]int, copies)
	}
	rows := make([]volumeRow, 0, copies/2+1)
	for _, dc := range ts.DataCenters {
		for _, rk := range dc.Racks {
			for _, n := range rk.Nodes {
				for _, d := range n.Disks {
					for _, v := range d.Volumes {
						var i int
						var ok bool
						if dense != nil {
							i, ok = int(dense[v.ID])-1, dense[v.ID] != 0
						} else {
							i, ok = sparse[v.ID]
						}
						if !ok {
							i = len(rows)
							if dense != nil {
								dense[v.ID] = int32(i + 1)
							} else {
								sparse[v.ID] = i
							}
							rows = append(rows, volumeRow{ID: v.ID, Collection: v.Collection, Replication: codeString(v.Replication),
								Want: v.Replication.Copies(), Servers: make([]string, 0, v.Replication.Copies())})
						}
						row := &rows[i]
						row.Have++
						row.Servers = append(row.Servers, n.URL)
						row.ReadOnly = row.ReadOnly || v.ReadOnly
						if v.Size >= row.Size {
							row.Size, row.Files, row.Deleted = v.Size, v.FileCount, v.DeletedBytes
						}
					}
				}
			}
		}
	}
	for i := range rows {
		r := &rows[i]
		r.Met = r.Have >= r.Want
		if r.Size > 0 {
			r.Garbage = float64(r.Deleted) / float64(r.Size)
		}
	}
	return rows
}

// codeString is replication.Code.String without fmt (100,000 calls a page).
func codeString(c replication.Code) string {
	if c.DiffDataCenter > 9 || c.DiffRack > 9 || c.SameRack > 9 {
		return c.String()
	}
	return string([]byte{'0' + c.DiffDataCenter, '0' + c.DiffRack, '0' + c.SameRack})
}

func (vq volumeQuery) keep(r *volumeRow) bool {
	if vq.Collection != "" && r.Collection != vq.Collection {
		return false
	}
	if vq.Server != "" && !slices.ContainsFunc(r.Servers, func(s string) bool { return strings.Contains(s, vq.Server) }) {
		return false
	}
	if (vq.ReadOnly == "yes" && !r.ReadOnly) || (vq.ReadOnly == "no" && r.ReadOnly) {
		return false
	}
	if vq.Unmet && r.Met {
		return false
	}
	return r.Garbage >= vq.MinGarbage
}

func (vq volumeQuery) compare(a, b *volumeRow) int {
	var c int
	switch vq.Sort {
	case "collection":
		c = cmp.Compare(a.Collection, b.Collection)
	case "replication":
		c = cmp.Compare(a.Replication, b.Replication)
	case "size":
		c = cmp.Compare(a.Size, b.Size)
	case "files":
		c = cmp.Compare(a.Files, b.Files)
	case "garbage":
		c = cmp.Compare(a.Garbage, b.Garbage)
	case "copies":
		c = cmp.Compare(a.Have-a.Want, b.Have-b.Want)
	}
	if c == 0 {
		c = cmp.Compare(a.ID, b.ID)
	}
	if vq.Desc {
		return -c
	}
	return c
}

// sortLink is a column header: its link orders by that column, flipping
// the direction when it is the current order.
type sortLink struct {
	Label, Key string
	Query      url.Values
	Current    bool
	Desc       bool
}

func (u *UI) volumesPage(w http.ResponseWriter, r *http.Request, id identity) {
	q := r.URL.Query()
	vq, err := parseVolumeQuery(q)
	if err != nil {
		u.render(w, r, http.StatusBadRequest, "error", id, "Bad request", map[string]any{"Message": err.Error()})
		return
	}
	ts := u.cfg.Source.TopologyStatus()
	all := volumeRows(ts)
	collections := map[string]bool{}
	kept := make([]*volumeRow, 0, len(all))
	unmet := 0
	for i := range all {
		collections[all[i].Collection] = true
		if !all[i].Met {
			unmet++
		}
		if vq.keep(&all[i]) {
			kept = append(kept, &all[i])
		}
	}
	total := len(kept)
	pages := max(1, (total+volumesPerPage-1)/volumesPerPage)
	if vq.Page > pages {
		vq.Page = pages
	}
	from := (vq.Page - 1) * volumesPerPage
	if k := min(total, from+volumesPerPage); k < total/4 {
		kept = smallest(kept, k, vq.compare) // an early page of many rows: no full sort
	} else {
		slices.SortFunc(kept, vq.compare)
	}
	kept = kept[from:min(total, from+volumesPerPage)]
	var headers []sortLink
	for _, s := range volumeSorts {
		hq := cloneValues(q)
		hq.Set("sort", s)
		hq.Del("page")
		desc := vq.Sort == s && !vq.Desc
		if desc {
			hq.Set("desc", "1")
		} else {
			hq.Del("desc")
		}
		headers = append(headers, sortLink{Label: s, Key: s, Query: hq, Current: vq.Sort == s, Desc: vq.Desc})
	}
	pageLink := func(p int) url.Values {
		pq := cloneValues(q)
		pq.Set("page", strconv.Itoa(p))
		return pq
	}
	var colls []string
	for c := range collections {
		colls = append(colls, c)
	}
	slices.Sort(colls)
	u.render(w, r, http.StatusOK, "volumes", id, "Volumes", map[string]any{
		"Rows": kept, "Total": total, "All": len(all), "Unmet": unmet, "Query": vq, "Headers": headers,
		"Page": vq.Page, "Pages": pages, "Prev": pageLink(vq.Page - 1), "Next": pageLink(vq.Page + 1),
		"Collections": colls, "Ec": filterEc(u.cfg.Source.EcVolumes(), vq.Collection), "MinGarbage": q.Get("garbage"),
	})
}

// smallest returns the k first rows in cmp's order, sorted, in O(n log k):
// a max-heap of the best k seen so far.
func smallest(rows []*volumeRow, k int, cmp func(a, b *volumeRow) int) []*volumeRow {
	if k <= 0 {
		return nil
	}
	h := make([]*volumeRow, 0, k)
	down := func(i int) {
		for {
			l, big := 2*i+1, i
			if l < len(h) && cmp(h[l], h[big]) > 0 {
				big = l
			}
			if r := l + 1; r < len(h) && cmp(h[r], h[big]) > 0 {
				big = r
			}
			if big == i {
				return
			}
			h[i], h[big] = h[big], h[i]
			i = big
		}
	}
	for _, r := range rows {
		if len(h) < k {
			h = append(h, r)
			for i := len(h) - 1; i > 0; {
				p := (i - 1) / 2
				if cmp(h[i], h[p]) <= 0 {
					break
				}
				h[i], h[p] = h[p], h[i]
				i = p
			}
			continue
		}
		if cmp(r, h[0]) < 0 {
			h[0] = r
			down(0)
		}
	}
	slices.SortFunc(h, cmp)
	return h
}

func filterEc(ec []topology.EcVolumeStatus, collection string) []topology.EcVolumeStatus {
	if collection == "" {
		return ec
	}
	var out []topology.EcVolumeStatus
	for _, e := range ec {
		if e.Collection == collection {
			out = append(out, e)
		}
	}
	return out
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}
