// Package metrics is Kelp's Prometheus instrumentation: a registry per
// server instance, an HTTP middleware and gRPC interceptors that count
// requests, their latency and bytes by API and operation, and the /metrics
// handler.
//
// # One registry per server, not the global default
//
// Every service (master, volume server, filer, S3 gateway, WebDAV) takes a
// *Registry in its Config; nil gives it a private one (Server.Metrics
// returns it). Tests start several servers of one kind in one process
// (internal/testcluster), and a process-wide registry would make their
// gauges collide (two volume servers registering kelp_volume_* twice) and
// their counters mix. A process serves one Registry on --metrics.port: the
// command line creates it and hands it to every service of the process
// (`kelp server` runs five of them on one registry; their request metrics
// are told apart by the api label, and each kind registers its own gauges
// once). New registers the Go runtime and process collectors (go_goroutines,
// process_resident_memory_bytes, ...) and kelp_build_info, so that every
// process exposes them.
//
// # Names
//
// Every Kelp family starts with kelp_. Request metrics are shared by all
// APIs (label api: master, volume, filer, s3, webdav):
//
//	kelp_http_requests_total{api,op,code}
//	kelp_http_request_duration_seconds{api,op}      histogram
//	kelp_http_request_bytes_total{api,op}           bytes received (bodies)
//	kelp_http_response_bytes_total{api,op}          bytes sent (bodies)
//	kelp_http_requests_in_flight{api}
//	kelp_grpc_requests_total{api,method,code}
//	kelp_grpc_request_duration_seconds{api,method}  histogram
//
// op is a small fixed set per API (volume: read, write, delete, status,
// ec, sync, other; S3: the operation name such as GetObject; filer and
// WebDAV: the method), never a path: label sets stay bounded. State that
// the services already hold (topology, raft, disks) is read at scrape time
// by collectors the services register (see docs/monitoring.md for the
// list), not updated on every heartbeat.
package metrics

import (
	"net"
	"net/http"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry is one process's (or one test server's) set of metrics.
type Registry struct {
	reg *prometheus.Registry

	httpOnce sync.Once
	http     *httpMetrics
	grpcOnce sync.Once
	grpc     *grpcMetrics

	mu         sync.Mutex
	once       map[string]bool // RegisterOnce names
	collectors []prometheus.Collector
}

// New returns a registry with the Go runtime and process collectors and
// kelp_build_info registered.
func New() *Registry {
	r := &Registry{reg: prometheus.NewRegistry(), once: map[string]bool{}}
	r.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	version, goVersion := "unknown", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
	}
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "kelp_build_info",
		Help:        "Always 1; the labels say which build of Kelp runs.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": goVersion},
	})
	build.Set(1)
	r.MustRegister(build)
	return r
}

// OrNew returns r, or a new registry when r is nil: what a service does
// with its Config's Registry.
func OrNew(r *Registry) *Registry {
	if r == nil {
		return New()
	}
	return r
}

// Prometheus is the underlying registry (for Gather in tests).
func (r *Registry) Prometheus() *prometheus.Registry { return r.reg }

// MustRegister registers collectors; a duplicate is a programming error.
func (r *Registry) MustRegister(cs ...prometheus.Collector) {
	r.reg.MustRegister(cs...)
	r.mu.Lock()
	r.collectors = append(r.collectors, cs...)
	r.mu.Unlock()
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// KelpNames lists the kelp_ families registered, also those that have no
// series yet (a request counter before the first request): what a
// dashboard may refer to.
func (r *Registry) KelpNames() []string {
	r.mu.Lock()
	cs := slices.Clone(r.collectors)
	r.mu.Unlock()
	ch := make(chan *prometheus.Desc)
	go func() {
		for _, c := range cs {
			c.Describe(ch)
		}
		close(ch)
	}()
	var names []string
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil && strings.HasPrefix(m[1], "kelp_") {
			names = append(names, m[1])
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// RegisterOnce calls register the first time it is called with name on r
// and never again: a kind of service registers its gauges once on a
// registry it may share with other services of the process.
func (r *Registry) RegisterOnce(name string, register func(*Registry)) {
	r.mu.Lock()
	done := r.once[name]
	r.once[name] = true
	r.mu.Unlock()
	if !done {
		register(r)
	}
}

// Handler serves the registry in the Prometheus text (or OpenMetrics)
// format.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Serve serves /metrics (and /healthz) on ln until Close of the returned
// server. Used by the command line for --metrics.port.
func (r *Registry) Serve(ln net.Listener) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", r.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: readHeaderTimeout}
	go srv.Serve(ln)
	return srv
}

// latencyBuckets cover 100µs (a cached read) to 60s (a large upload).
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// LatencyBuckets returns the histogram buckets Kelp uses for latencies,
// for services that declare their own histograms.
func LatencyBuckets() []float64 { return append([]float64(nil), latencyBuckets...) }
