// Package clienttest is an in-memory fake Kelp cluster for tests: one master
// and a few volume servers on httptest servers (127.0.0.1), speaking the
// public HTTP API (/dir/assign, /dir/lookup, PUT|POST|GET|HEAD|DELETE /<fid>)
// faithfully enough to test clients, with hooks to inject failures.
//
// Replicas of a volume share one in-memory needle map, as if the primary had
// forwarded every write. Nothing is persisted.
//
// Only tests import it (client, benchmark, shell...). It must not grow into a
// second implementation of the servers: behaviour that is not the public
// contract belongs in the real servers' own tests.
package clienttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/fid"
)

// Options shape a Cluster.
type Options struct {
	Servers  int   // volume servers; 0 means 1
	Volumes  int   // volume ids 1..Volumes; 0 means 2*Servers
	Replicas int   // copies of each volume on distinct servers; 0 means 1
	MaxSize  int64 // largest needle accepted (413 above); 0 means 64 MiB
}

// Hook may answer a request itself (return true) instead of the fake, to
// inject failures. It runs on the server's goroutine.
type Hook func(w http.ResponseWriter, r *http.Request) bool

// Cluster is a running fake cluster. Close it, or let t.Cleanup do it.
type Cluster struct {
	Master  *Master
	Servers []*VolumeServer
	volumes map[uint32]*volumeData // fixed after NewCluster
	maxSize int64
	crc     *crc32.Table
}

// NewCluster starts a cluster and registers its Close with tb.Cleanup.
func NewCluster(tb testing.TB, opts Options) *Cluster {
	tb.Helper()
	if opts.Servers <= 0 {
		opts.Servers = 1
	}
	if opts.Volumes <= 0 {
		opts.Volumes = 2 * opts.Servers
	}
	if opts.Replicas <= 0 {
		opts.Replicas = 1
	}
	if opts.Replicas > opts.Servers {
		tb.Fatalf("clienttest: %d replicas need at least as many servers, have %d", opts.Replicas, opts.Servers)
	}
	if opts.MaxSize <= 0 {
		opts.MaxSize = 64 << 20
	}
	c := &Cluster{volumes: make(map[uint32]*volumeData), maxSize: opts.MaxSize, crc: crc32.MakeTable(crc32.Castagnoli)}
	for i := 0; i < opts.Servers; i++ {
		vs := &VolumeServer{cluster: c, volumes: make(map[uint32]bool)}
		vs.srv = httptest.NewServer(http.HandlerFunc(vs.serve))
		vs.URL = strings.TrimPrefix(vs.srv.URL, "http://")
		c.Servers = append(c.Servers, vs)
	}
	for v := 1; v <= opts.Volumes; v++ {
		vd := &volumeData{id: uint32(v), needles: make(map[uint64]*needle)}
		for k := 0; k < opts.Replicas; k++ {
			s := c.Servers[(v-1+k)%opts.Servers]
			s.volumes[uint32(v)] = true
			vd.servers = append(vd.servers, s)
		}
		c.volumes[uint32(v)] = vd
	}
	m := &Master{cluster: c}
	for v := 1; v <= opts.Volumes; v++ {
		m.writable = append(m.writable, uint32(v))
	}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	m.URL = strings.TrimPrefix(m.srv.URL, "http://")
	c.Master = m
	tb.Cleanup(c.Close)
	return c
}

// Close stops every server.
func (c *Cluster) Close() {
	c.Master.srv.Close()
	for _, s := range c.Servers {
		s.Close()
	}
}

// Needle returns the stored bytes of id, if present (for assertions).
func (c *Cluster) Needle(id fid.FileID) ([]byte, bool) {
	vd := c.volumes[id.Volume]
	if vd == nil {
		return nil, false
	}
	vd.mu.RLock()
	defer vd.mu.RUnlock()
	n := vd.needles[id.Key]
	if n == nil || n.cookie != id.Cookie {
		return nil, false
	}
	return n.data, true
}

// NeedleCount is the number of live needles in the cluster.
func (c *Cluster) NeedleCount() int {
	total := 0
	for _, vd := range c.volumes {
		vd.mu.RLock()
		total += len(vd.needles)
		vd.mu.RUnlock()
	}
	return total
}

// ServerOf returns the volume server listening on url ("host:port").
func (c *Cluster) ServerOf(url string) *VolumeServer {
	for _, s := range c.Servers {
		if s.URL == url {
			return s
		}
	}
	return nil
}

type needle struct {
	cookie uint32
	data   []byte
	ctype  string
	name   string
	etag   string
	mtime  time.Time
}

type volumeData struct {
	id      uint32
	servers []*VolumeServer // replicas in lookup order; servers[0] is the primary
	mu      sync.RWMutex
	needles map[uint64]*needle
}

// Master is the fake master.
type Master struct {
	URL     string // "host:port"
	Assigns atomic.Int64
	Lookups atomic.Int64

	cluster  *Cluster
	srv      *httptest.Server
	hook     atomic.Pointer[Hook]
	nextKey  atomic.Uint64
	rr       atomic.Uint64
	mu       sync.Mutex
	writable []uint32
	lastQ    string
}

// SetHook installs h (nil removes it).
func (m *Master) SetHook(h Hook) { m.hook.Store(&h) }

// SetWritable sets the volumes assign hands out; none means 503.
func (m *Master) SetWritable(vols ...uint32) {
	m.mu.Lock()
	m.writable = append([]uint32(nil), vols...)
	m.mu.Unlock()
}

// LastAssignQuery is the raw query of the latest /dir/assign.
func (m *Master) LastAssignQuery() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastQ
}

// Close stops the master (to test fail-over).
func (m *Master) Close() { m.srv.Close() }

func (m *Master) serve(w http.ResponseWriter, r *http.Request) {
	if h := m.hook.Load(); h != nil && *h != nil && (*h)(w, r) {
		return
	}
	switch r.URL.Path {
	case "/dir/assign":
		m.assign(w, r)
	case "/dir/lookup":
		m.lookup(w, r)
	default:
		WriteError(w, http.StatusNotFound, "no such endpoint "+r.URL.Path)
	}
}

func (m *Master) assign(w http.ResponseWriter, r *http.Request) {
	m.Assigns.Add(1)
	q := r.URL.Query()
	count := uint64(1)
	if s := q.Get("count"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 {
			WriteError(w, http.StatusBadRequest, "bad count "+strconv.Quote(s))
			return
		}
		count = n
	}
	m.mu.Lock()
	m.lastQ = r.URL.RawQuery
	writable := m.writable
	m.mu.Unlock()
	if len(writable) == 0 {
		WriteError(w, http.StatusServiceUnavailable, "no writable volume")
		return
	}
	vd := m.cluster.volumes[writable[m.rr.Add(1)%uint64(len(writable))]]
	key := m.nextKey.Add(count) - count + 1
	id := fid.FileID{Volume: vd.id, Key: key, Cookie: rand.Uint32()}
	primary := vd.servers[0].URL
	writeJSON(w, http.StatusOK, map[string]any{"fid": id.String(), "url": primary, "publicUrl": primary, "count": count})
}

func (m *Master) lookup(w http.ResponseWriter, r *http.Request) {
	m.Lookups.Add(1)
	s := r.URL.Query().Get("volumeId")
	if i := strings.IndexByte(s, ','); i >= 0 {
		s = s[:i] // a whole file id is accepted too
	}
	v, err := fid.ParseVolumeID(s)
	if err != nil {
		WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	vd := m.cluster.volumes[v]
	if vd == nil {
		WriteError(w, http.StatusNotFound, "volume "+s+" not found")
		return
	}
	type loc struct {
		URL        string `json:"url"`
		PublicURL  string `json:"publicUrl"`
		DataCenter string `json:"dataCenter"`
		Rack       string `json:"rack"`
	}
	var locs []loc
	for i, s := range vd.servers {
		locs = append(locs, loc{URL: s.URL, PublicURL: s.URL, DataCenter: "dc1", Rack: "r" + strconv.Itoa(i+1)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"volumeId": s, "locations": locs})
}

// VolumeServer is one fake volume server.
type VolumeServer struct {
	URL    string // "host:port"
	Reads  atomic.Int64
	Writes atomic.Int64

	cluster *Cluster
	hook    atomic.Pointer[Hook]
	volumes map[uint32]bool // fixed after NewCluster

	mu     sync.Mutex
	srv    *httptest.Server // nil while frozen
	frozen *frozenListener
}

// SetHook installs h (nil removes it).
func (s *VolumeServer) SetHook(h Hook) { s.hook.Store(&h) }

// Close stops the server (to test fail-over). Its volumes stay in lookups.
func (s *VolumeServer) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		s.srv.Close()
	}
	if s.frozen != nil {
		s.frozen.Close()
	}
}

// Freeze makes the server behave like a stopped process (SIGSTOP) or one
// behind a link that drops replies: its port still accepts TCP connections,
// but no request is ever answered. Its open connections are closed. Thaw
// serves again on the same address.
func (s *VolumeServer) Freeze(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		return
	}
	s.srv.Close()
	s.srv = nil
	l, err := net.Listen("tcp", s.URL)
	if err != nil {
		tb.Fatalf("clienttest: freeze %s: %v", s.URL, err)
	}
	s.frozen = newFrozenListener(l)
}

// FrozenConns is the number of connections the frozen port has accepted.
func (s *VolumeServer) FrozenConns() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen == nil {
		return 0
	}
	return s.frozen.accepted.Load()
}

// Thaw undoes Freeze.
func (s *VolumeServer) Thaw(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen == nil {
		return
	}
	s.frozen.Close()
	s.frozen = nil
	l, err := net.Listen("tcp", s.URL)
	if err != nil {
		tb.Fatalf("clienttest: thaw %s: %v", s.URL, err)
	}
	s.srv = &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(s.serve)}}
	s.srv.Start()
}

// frozenListener accepts connections and holds them without reading or
// writing a byte, until Close.
type frozenListener struct {
	l        net.Listener
	accepted atomic.Int64
	mu       sync.Mutex
	conns    []net.Conn
	done     chan struct{}
}

func newFrozenListener(l net.Listener) *frozenListener {
	f := &frozenListener{l: l, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			f.accepted.Add(1)
			f.mu.Lock()
			f.conns = append(f.conns, c)
			f.mu.Unlock()
		}
	}()
	return f
}

func (f *frozenListener) Close() {
	f.l.Close()
	<-f.done
	f.mu.Lock()
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
}

func (s *VolumeServer) serve(w http.ResponseWriter, r *http.Request) {
	if h := s.hook.Load(); h != nil && *h != nil && (*h)(w, r) {
		return
	}
	id, err := fid.Parse(strings.TrimPrefix(r.URL.Path, "/"))
	if err != nil {
		WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	if !s.volumes[id.Volume] {
		WriteError(w, http.StatusNotFound, fmt.Sprintf("volume %d not on this server", id.Volume))
		return
	}
	vd := s.cluster.volumes[id.Volume]
	switch r.Method {
	case http.MethodPut, http.MethodPost:
		s.write(w, r, vd, id)
	case http.MethodGet, http.MethodHead:
		s.read(w, r, vd, id)
	case http.MethodDelete:
		vd.mu.Lock()
		n := vd.needles[id.Key]
		found := n != nil && n.cookie == id.Cookie
		if found {
			delete(vd.needles, id.Key)
		}
		vd.mu.Unlock()
		if !found {
			WriteError(w, http.StatusNotFound, "needle not found")
			return
		}
		writeJSON(w, http.StatusAccepted, map[string]any{"size": len(n.data)})
	default:
		WriteError(w, http.StatusMethodNotAllowed, "method "+r.Method)
	}
}

func (s *VolumeServer) write(w http.ResponseWriter, r *http.Request, vd *volumeData, id fid.FileID) {
	s.Writes.Add(1)
	n := &needle{cookie: id.Cookie, ctype: r.Header.Get("Content-Type"), mtime: time.Now()}
	body := io.Reader(http.MaxBytesReader(w, r.Body, s.cluster.maxSize))
	if mt, _, err := mime.ParseMediaType(n.ctype); err == nil && mt == "multipart/form-data" {
		mr, err := r.MultipartReader()
		if err != nil {
			WriteError(w, http.StatusBadRequest, err.Error())
			return
		}
		for {
			p, err := mr.NextPart()
			if err != nil {
				WriteError(w, http.StatusBadRequest, "no file part: "+err.Error())
				return
			}
			if p.FileName() != "" {
				n.name, n.ctype, body = p.FileName(), p.Header.Get("Content-Type"), p
				break
			}
		}
	}
	data, err := io.ReadAll(body)
	if err != nil {
		if _, ok := err.(*http.MaxBytesError); ok || int64(len(data)) > s.cluster.maxSize {
			WriteError(w, http.StatusRequestEntityTooLarge, "needle too large")
			return
		}
		WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	if int64(len(data)) > s.cluster.maxSize {
		WriteError(w, http.StatusRequestEntityTooLarge, "needle too large")
		return
	}
	n.data = data
	n.etag = fmt.Sprintf("%08x", crc32.Checksum(data, s.cluster.crc))
	vd.mu.Lock()
	if old := vd.needles[id.Key]; old != nil && old.cookie != id.Cookie {
		vd.mu.Unlock()
		WriteError(w, http.StatusConflict, "key in use with another cookie")
		return
	}
	vd.needles[id.Key] = n
	vd.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{"name": n.name, "size": len(data), "eTag": n.etag})
}

func (s *VolumeServer) read(w http.ResponseWriter, r *http.Request, vd *volumeData, id fid.FileID) {
	s.Reads.Add(1)
	vd.mu.RLock()
	n := vd.needles[id.Key]
	vd.mu.RUnlock()
	if n == nil || n.cookie != id.Cookie {
		WriteError(w, http.StatusNotFound, "needle not found")
		return
	}
	h := w.Header()
	h.Set("Etag", `"`+n.etag+`"`)
	ctype := n.ctype
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	h.Set("Content-Type", ctype)
	if n.name != "" {
		h.Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": n.name}))
	}
	http.ServeContent(w, r, "", n.mtime, bytes.NewReader(n.data))
}

// WriteError answers status with the API's {"error": msg} body.
func WriteError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
