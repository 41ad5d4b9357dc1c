package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/kelpfs/kelp/internal/backup"
	"github.com/kelpfs/kelp/internal/filersync"
	"github.com/kelpfs/kelp/internal/fsview"
	"github.com/kelpfs/kelp/internal/metrics"
	"github.com/kelpfs/kelp/internal/security"
)

// metricsFlags are --metrics.port and --metrics.ip, on every long-running
// command. The process has one registry (every service of it reports
// there); with a port it is served at http://ip:port/metrics.
type metricsFlags struct {
	port int
	ip   string
	reg  *metrics.Registry
	fl   *pflag.FlagSet
}

func (m *metricsFlags) addFlags(fl *pflag.FlagSet, defPort int) {
	m.fl = fl
	fl.IntVar(&m.port, "metrics.port", defPort, "serve Prometheus metrics at http://<metrics.ip>:<port>/metrics (0: off)")
	fl.StringVar(&m.ip, "metrics.ip", "", "IP address the metrics listener binds (default: the process's bind address, or all interfaces for commands without one)")
}

// registry is the process's registry, made on first use.
func (m *metricsFlags) registry() *metrics.Registry {
	if m.reg == nil {
		m.reg = metrics.New()
	}
	return m.reg
}

// start serves the registry when a port is set; bind is the process's
// bind address ("" for none). The returned stop is never nil. A port given
// on the command line that cannot be bound is an error; a default port in
// use (two `kelp server`s on one machine) is a warning on out, and the
// process runs without serving metrics.
func (m *metricsFlags) start(bind string, out io.Writer) (stop func(), err error) {
	if m.port == 0 {
		return func() {}, nil
	}
	if m.port < 0 || m.port > 65535 {
		return nil, fmt.Errorf("--metrics.port: %d is not a port", m.port)
	}
	ip := m.ip
	if ip == "" {
		ip = bind
	}
	if ip == "" {
		ip = "0.0.0.0"
	} else if net.ParseIP(ip) == nil {
		return nil, fmt.Errorf("--metrics.ip: %q is not an IP address", ip)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(m.port)))
	if err != nil {
		if m.fl != nil && !m.fl.Changed("metrics.port") {
			fmt.Fprintf(out, "warning: metrics not served: %v (set --metrics.port)\n", err)
			return func() {}, nil
		}
		return nil, fmt.Errorf("--metrics.port: %w", err)
	}
	// Under TLS the metrics port is TLS too (every port is); Prometheus
	// scrapes it with scheme https and the cluster's CA.
	ln = security.Process().Listen(ln, security.Public)
	srv := m.registry().Serve(ln)
	fmt.Fprintf(out, "metrics on %s/metrics\n", security.URL(ln.Addr().String()))
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}, nil
}

// registerSyncMetrics reports a filer.sync's positions and lag.
func registerSyncMetrics(r *metrics.Registry, s *filersync.Syncer) {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{"from", "to"}, nil)
	}
	c := &syncCollector{s: s,
		seq:     d("kelp_filersync_seq", "Last source event applied."),
		lag:     d("kelp_filersync_lag_events", "Source events not yet applied."),
		lagSec:  d("kelp_filersync_lag_seconds", "Age of the oldest source event not yet applied."),
		copies:  d("kelp_filersync_copied_files_total", "Files whose data was copied."),
		bytes:   d("kelp_filersync_copied_bytes_total", "Bytes of data copied."),
		deletes: d("kelp_filersync_deletes_total", "Deletes applied."),
		errs:    d("kelp_filersync_failing", "1 while the last attempt failed."),
	}
	r.MustRegister(c)
}

type syncCollector struct {
	s                                              *filersync.Syncer
	seq, lag, lagSec, copies, bytes, deletes, errs *prometheus.Desc
}

func (c *syncCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.seq, c.lag, c.lagSec, c.copies, c.bytes, c.deletes, c.errs} {
		ch <- d
	}
}

func (c *syncCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.s.Status(context.Background()) {
		m := func(d *prometheus.Desc, t prometheus.ValueType, v float64) {
			ch <- prometheus.MustNewConstMetric(d, t, v, st.From, st.To)
		}
		m(c.seq, prometheus.GaugeValue, float64(st.Seq))
		m(c.lag, prometheus.GaugeValue, float64(st.LagEvents))
		m(c.lagSec, prometheus.GaugeValue, st.LagSeconds)
		m(c.copies, prometheus.CounterValue, float64(st.Copies))
		m(c.bytes, prometheus.CounterValue, float64(st.Bytes))
		m(c.deletes, prometheus.CounterValue, float64(st.Deletes))
		failing := 0.0
		if st.LastError != "" {
			failing = 1
		}
		m(c.errs, prometheus.GaugeValue, failing)
	}
}

// registerBackupMetrics reports a filer.backup's progress.
func registerBackupMetrics(r *metrics.Registry, st *backup.Stats) {
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	r.MustRegister(
		counter("kelp_backup_copied_files_total", "Files copied to the backup.", func() float64 { return float64(st.Copied.Load()) }),
		counter("kelp_backup_copied_bytes_total", "Bytes copied to the backup.", func() float64 { return float64(st.Bytes.Load()) }),
		counter("kelp_backup_deletes_total", "Deletes applied to the backup.", func() float64 { return float64(st.Deleted.Load()) }),
		counter("kelp_backup_full_scans_total", "Full tree scans (first run, trimmed event log).", func() float64 { return float64(st.FullScans.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kelp_backup_seq", Help: "Last filer event applied to the backup."},
			func() float64 { return float64(st.Seq.Load()) }),
	)
}

// registerViewMetrics reports a mount's view of the filer.
func registerViewMetrics(r *metrics.Registry, v *fsview.FS) {
	counter := func(name, help string, f func(fsview.Stats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(v.Stats())) })
	}
	gauge := func(name, help string, f func(fsview.Stats) int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(f(v.Stats())) })
	}
	r.MustRegister(
		counter("kelp_mount_filer_calls_total", "Unary calls to the filer, of any kind (lookups, creates, commits, ...).", func(s fsview.Stats) int64 { return s.FilerCalls }),
		counter("kelp_mount_filer_lookups_total", "Metadata lookups that went to the filer (cache misses).", func(s fsview.Stats) int64 { return s.FilerLookups }),
		gauge("kelp_mount_meta_cache_entries", "Entries in the metadata cache.", func(s fsview.Stats) int64 { return int64(s.MetaCacheEntries) }),
		counter("kelp_mount_chunk_cache_hits_total", "Chunk reads served by the local chunk cache.", func(s fsview.Stats) int64 { return s.ChunkCacheHits }),
		counter("kelp_mount_chunk_cache_misses_total", "Chunk reads the local chunk cache did not hold.", func(s fsview.Stats) int64 { return s.ChunkCacheMisses }),
		gauge("kelp_mount_chunk_cache_bytes", "Bytes in the local chunk cache.", func(s fsview.Stats) int64 { return s.ChunkCacheBytes }),
		counter("kelp_mount_read_misses_total", "Reads that found their bytes neither in a read-ahead buffer nor in a fetch on its way, and fetched them themselves.", func(s fsview.Stats) int64 { return s.ReadMisses }),
		counter("kelp_mount_open_fetch_kept_total", "Small files opened for reading whose fetch, started from the cached entry during the open's filer check, was kept.", func(s fsview.Stats) int64 { return s.SpecHits }),
		counter("kelp_mount_open_fetch_dropped_total", "Such fetches dropped: the filer's entry at the open had other content.", func(s fsview.Stats) int64 { return s.SpecMisses }),
	)
}
