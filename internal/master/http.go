package master

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/topology"
)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	// Leader-only requests are forwarded by followers (forward.go). Lookups
	// fall back to this master's own topology when no leader can be reached,
	// so reads go on during an election. Status pages are each master's own.
	mux.HandleFunc("/dir/assign", s.onLeader(s.handleAssign, nil))
	mux.HandleFunc("GET /dir/lookup", s.onLeader(s.handleLookup, s.handleLookup))
	mux.HandleFunc("GET /dir/status", s.handleDirStatus)
	mux.HandleFunc("GET /dir/readtoken", s.handleReadToken)
	mux.HandleFunc("GET /admin/token", s.handleAdminToken)
	mux.HandleFunc("GET /cluster/status", s.handleClusterStatus)
	mux.HandleFunc("GET /cluster/raft", s.handleRaft)
	mux.HandleFunc("GET /cluster/topology", s.onLeader(s.handleTopology, nil))
	mux.HandleFunc("POST /cluster/configure", s.onLeader(s.handleConfigure, nil))
	mux.HandleFunc("POST /admin/lock", s.onLeader(s.handleLock, nil))
	mux.HandleFunc("POST /admin/unlock", s.onLeader(s.handleUnlock, nil))
	mux.HandleFunc("POST /vol/grow", s.onLeader(s.handleGrow, nil))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("ok"))
	})
	if s.cfg.AdminUI != nil {
		mux.Handle("/", s.cfg.AdminUI(s))
	}
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"master: encode response"}`)
	}
	writeRawJSON(w, status, b)
}

func writeRawJSON(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(status)
	w.Write(b)
}

// writeError answers an error; a "not the leader" error carries the
// leader's address as a hint that internal/client follows.
func writeError(w http.ResponseWriter, err error) {
	body := map[string]string{"error": err.Error()}
	var nl *notLeaderError
	if errors.As(err, &nl) && nl.leader != "" {
		body["leader"] = nl.leader
	}
	writeJSON(w, httpStatus(err), body)
}

func (s *Server) handleAssign(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "use GET or POST"})
		return
	}
	q := r.URL.Query()
	req := assignRequest{
		Collection: q.Get("collection"), Replication: q.Get("replication"), TTL: q.Get("ttl"), DataCenter: q.Get("dataCenter"),
	}
	if c := q.Get("count"); c != "" {
		n, err := strconv.ParseUint(c, 10, 64)
		if err != nil || n == 0 {
			writeError(w, fmt.Errorf("%w: count %q must be a positive integer", ErrBadRequest, c))
			return
		}
		req.Count = n
	}
	res, err := s.assign(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	b := appendAssignJSON(make([]byte, 0, 384), res)
	if tok := s.cfg.Signer.Sign(res.FID, res.Count); tok != "" {
		b = append(b[:len(b)-1], `,"auth":`...)
		b = appendJSONString(b, tok)
		b = append(b, '}')
	}
	writeRawJSON(w, http.StatusOK, b)
}

// appendAssignJSON encodes the assign answer by hand: it is the hot path and
// json.Marshal would cost more than the rest of the assign.
func appendAssignJSON(b []byte, res assignResult) []byte {
	loc := res.Locations[0]
	b = append(b, `{"fid":"`...)
	b = strconv.AppendUint(b, uint64(res.FID.Volume), 10)
	b = append(b, ',')
	b = strconv.AppendUint(b, res.FID.Key, 16)
	const hex = "0123456789abcdef"
	for shift := 28; shift >= 0; shift -= 4 {
		b = append(b, hex[(res.FID.Cookie>>shift)&0xf])
	}
	b = append(b, `","url":`...)
	b = appendJSONString(b, loc.URL)
	b = append(b, `,"publicUrl":`...)
	b = appendJSONString(b, loc.PublicURL)
	b = append(b, `,"count":`...)
	b = strconv.AppendUint(b, res.Count, 10)
	return append(b, '}')
}

func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			enc, _ := json.Marshal(s)
			return append(b, enc...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// lookupLocation is the public shape of a location in /dir/lookup.
type lookupLocation struct {
	URL        string `json:"url"`
	PublicURL  string `json:"publicUrl"`
	DataCenter string `json:"dataCenter"`
	Rack       string `json:"rack"`
	// EcShards, for an erasure-coded volume: bit i set, shard i is there.
	EcShards uint32 `json:"ecShards,omitempty"`
	// Unreachable: this master cannot reach the copy's server now (its
	// probes fail or its heartbeat stream broke). Such copies come last; a
	// write under the degraded policy does not wait for them.
	Unreachable bool `json:"unreachable,omitempty"`
}

type lookupResponse struct {
	VolumeID  string           `json:"volumeId"`
	Locations []lookupLocation `json:"locations,omitempty"`
	Error     string           `json:"error,omitempty"`
	// EcScheme is "k+m" when the volume is erasure-coded.
	EcScheme string `json:"ecScheme,omitempty"`
	// MinCopies is the volume's write policy: absent (0) strict, a write is
	// acknowledged only when every copy has it; N degraded, once N have it.
	MinCopies int `json:"minCopies,omitempty"`
}

// parseVolumeParam accepts "3" or a whole file id "3,01637037d6".
func parseVolumeParam(v string) (uint32, error) {
	if i := strings.IndexByte(v, ','); i >= 0 {
		v = v[:i]
	}
	id, err := fid.ParseVolumeID(v)
	if err != nil {
		return 0, fmt.Errorf("%w: volumeId: %w", ErrBadRequest, err)
	}
	return id, nil
}

func (s *Server) handleLookup(w http.ResponseWriter, r *http.Request) {
	raw := r.URL.Query().Get("volumeId")
	vid, err := parseVolumeParam(raw)
	if err != nil {
		writeJSON(w, httpStatus(err), lookupResponse{VolumeID: raw, Error: err.Error()})
		return
	}
	resp := lookupResponse{VolumeID: strconv.FormatUint(uint64(vid), 10)}
	locs, err := s.topo.Lookup(vid)
	if err != nil {
		if !s.cons.IsLeader() {
			// A follower's view is a copy: not knowing a volume is not
			// proof that it does not exist.
			writeError(w, s.notLeader())
			return
		}
		if !s.warm() {
			writeError(w, errWarmingUp)
			return
		}
		resp.Error = fmt.Sprintf("volume %d not found", vid)
		writeJSON(w, httpStatus(err), resp)
		return
	}
	resp.MinCopies = s.topo.VolumeMinCopies(vid)
	for _, l := range locs {
		resp.Locations = append(resp.Locations, lookupLocation{l.URL, l.PublicURL, l.DataCenter, l.Rack, l.EcShards, l.Unreachable})
		if l.EcShards != 0 && resp.EcScheme == "" {
			if ec, ok := s.topo.LookupEC(vid); ok {
				resp.EcScheme = ec.Scheme
			}
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) handleDirStatus(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		Leader   string          `json:"leader"`
		Topology topology.Status `json:"topology"`
		Time     time.Time       `json:"time"`
	}{s.leader(), s.topo.Status(), time.Now().UTC()})
}

func (s *Server) handleGrow(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	count := 0
	if c := q.Get("count"); c != "" {
		n, err := strconv.Atoi(c)
		if err != nil || n <= 0 || n > 1000 {
			writeError(w, fmt.Errorf("%w: count %q must be 1 to 1000", ErrBadRequest, c))
			return
		}
		count = n
	}
	if !s.cons.IsLeader() {
		writeError(w, s.notLeader())
		return
	}
	key, err := s.layoutKey(q.Get("collection"), q.Get("replication"), q.Get("ttl"))
	if err != nil {
		writeError(w, err)
		return
	}
	if count == 0 {
		count = growCount(key.Replication, s.topo.DisksWithRoom(q.Get("dataCenter")))
	}
	ids, err := s.grow(r.Context(), key, q.Get("dataCenter"), count)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"count": len(ids), "volumeIds": ids})
}
