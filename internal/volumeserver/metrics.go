package volumeserver

import (
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kelpfs/kelp/internal/metrics"
)

// Metrics is the registry this server reports to (Config.Metrics, or its
// own).
func (s *Server) Metrics() *metrics.Registry { return s.metrics }

// httpOp names a data-path request's operation: read, write, delete for
// files; status, ec, sync for the rest.
func httpOp(r *http.Request) string {
	p := r.URL.Path
	switch {
	case p == "/status" || p == "/healthz":
		return "status"
	case strings.HasPrefix(p, "/ec/"):
		return "ec"
	case strings.HasPrefix(p, "/sync/"):
		return "sync"
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return "read"
	case http.MethodPut, http.MethodPost:
		return "write"
	case http.MethodDelete:
		return "delete"
	}
	return "other"
}

// volumeCollector reads the store at scrape time.
type volumeCollector struct {
	s                                                             *Server
	volumes, readOnly, bytes, garbage, files, maxVol, free, total *prometheus.Desc
	ecShards, ecBytes, hbAge, ecCache                             *prometheus.Desc
}

func newVolumeCollector(s *Server) *volumeCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &volumeCollector{
		s:        s,
		volumes:  d("kelp_volume_server_volumes", "Volumes on each disk.", "dir"),
		readOnly: d("kelp_volume_server_volumes_read_only", "Read-only volumes (marked, full, or disabled by an I/O error) on each disk.", "dir"),
		bytes:    d("kelp_volume_server_volume_bytes", "Bytes of the volumes' data files on each disk.", "dir"),
		garbage:  d("kelp_volume_server_garbage_bytes", "Bytes of deleted and overwritten records awaiting vacuum on each disk.", "dir"),
		files:    d("kelp_volume_server_files", "Live files (needles) on each disk.", "dir"),
		maxVol:   d("kelp_volume_server_max_volumes", "Volume slots of each disk (--max).", "dir"),
		free:     d("kelp_volume_server_disk_free_bytes", "Bytes free for this server on each disk's file system.", "dir"),
		total:    d("kelp_volume_server_disk_total_bytes", "Size of each disk's file system.", "dir"),
		ecShards: d("kelp_volume_server_ec_shards", "Erasure-coded shards on each disk.", "dir"),
		ecBytes:  d("kelp_volume_server_ec_shard_bytes", "Bytes of erasure-coded shard files on each disk.", "dir"),
		hbAge:    d("kelp_volume_server_heartbeat_age_seconds", "Seconds since the master last answered a heartbeat (since start if it never did)."),
		ecCache:  d("kelp_volume_server_ec_cache_bytes", "Bytes of reconstructed EC blocks cached."),
	}
}

func (c *volumeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.volumes, c.readOnly, c.bytes, c.garbage, c.files, c.maxVol, c.free, c.total, c.ecShards, c.ecBytes, c.hbAge, c.ecCache} {
		ch <- d
	}
}

func (c *volumeCollector) Collect(ch chan<- prometheus.Metric) {
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, d := range c.s.store.Status() {
		var ro, bytes, garbage, files float64
		for _, v := range d.Volumes {
			if v.ReadOnly || v.Full {
				ro++
			}
			bytes += float64(v.Size)
			garbage += float64(v.DeletedBytes)
			files += float64(v.FileCount)
		}
		var shards, shardBytes float64
		for _, e := range d.EcShards {
			n := float64(e.Shards.Count())
			shards += n
			shardBytes += n * float64(e.ShardSize)
		}
		g(c.volumes, float64(len(d.Volumes)), d.Dir)
		g(c.readOnly, ro, d.Dir)
		g(c.bytes, bytes, d.Dir)
		g(c.garbage, garbage, d.Dir)
		g(c.files, files, d.Dir)
		g(c.maxVol, float64(d.MaxVolumes), d.Dir)
		g(c.free, float64(d.FreeBytes), d.Dir)
		if c.s.cfg.FS == nil {
			if t, ok := diskTotalBytes(d.Dir); ok {
				g(c.total, float64(t), d.Dir)
			}
		}
		g(c.ecShards, shards, d.Dir)
		g(c.ecBytes, shardBytes, d.Dir)
	}
	last := time.Unix(0, c.s.lastHeartbeat.Load())
	g(c.hbAge, time.Since(last).Seconds())
	g(c.ecCache, float64(c.s.ecCache.bytes()))
}
