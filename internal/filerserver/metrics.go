package filerserver

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kelpfs/kelp/internal/filer/store"
	"github.com/kelpfs/kelp/internal/metrics"
)

// Metrics is the registry this filer reports to (Config.Metrics, or its
// own).
func (s *Server) Metrics() *metrics.Registry { return s.metrics }

// storeMetrics are the metadata store's operation latencies, shared by the
// filers of one registry (label store: embedded, postgres, redis).
type storeMetrics struct {
	latency *prometheus.HistogramVec
	errors  *prometheus.CounterVec
}

func newStoreMetrics(r *metrics.Registry) *storeMetrics {
	m := &storeMetrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kelp_filer_store_duration_seconds", Help: "Duration of metadata store operations (get, scan, view, update: a whole transaction with its commit).",
			Buckets: metrics.LatencyBuckets(),
		}, []string{"store", "op"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kelp_filer_store_errors_total", Help: "Metadata store operations that failed (not-found answers are no failure).",
		}, []string{"store", "op"}),
	}
	r.MustRegister(m.latency, m.errors)
	return m
}

// timedStore measures a store.Store.
type timedStore struct {
	store.Store
	get, scan, view, update prometheus.Observer
	errs                    [4]prometheus.Counter
}

func newTimedStore(st store.Store, kind string, m *storeMetrics) *timedStore {
	t := &timedStore{Store: st}
	t.get = m.latency.WithLabelValues(kind, "get")
	t.scan = m.latency.WithLabelValues(kind, "scan")
	t.view = m.latency.WithLabelValues(kind, "view")
	t.update = m.latency.WithLabelValues(kind, "update")
	for i, op := range []string{"get", "scan", "view", "update"} {
		t.errs[i] = m.errors.WithLabelValues(kind, op)
	}
	return t
}

func (t *timedStore) done(o prometheus.Observer, i int, start time.Time, err error) {
	o.Observe(time.Since(start).Seconds())
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrStopScan) {
		t.errs[i].Inc()
	}
}

func (t *timedStore) Get(ctx context.Context, key []byte) ([]byte, error) {
	start := time.Now()
	v, err := t.Store.Get(ctx, key)
	t.done(t.get, 0, start, err)
	return v, err
}

func (t *timedStore) Scan(ctx context.Context, start, end []byte, limit int, fn store.ScanFunc) error {
	t0 := time.Now()
	err := t.Store.Scan(ctx, start, end, limit, fn)
	t.done(t.scan, 1, t0, err)
	return err
}

func (t *timedStore) View(ctx context.Context, fn func(tx store.ReadTx) error) error {
	start := time.Now()
	err := t.Store.View(ctx, fn)
	t.done(t.view, 2, start, err)
	return err
}

func (t *timedStore) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	start := time.Now()
	err := t.Store.Update(ctx, fn)
	t.done(t.update, 3, start, err)
	return err
}

// subscribers tracks the metadata subscriptions (SubscribeMetadata
// streams: gateways, filer.sync, filer.backup) and how far each got.
type subscribers struct {
	mu   sync.Mutex
	subs map[*atomic.Uint64]bool
	sent atomic.Uint64
}

func (s *subscribers) add() *atomic.Uint64 {
	p := new(atomic.Uint64)
	s.mu.Lock()
	if s.subs == nil {
		s.subs = map[*atomic.Uint64]bool{}
	}
	s.subs[p] = true
	s.mu.Unlock()
	return p
}

func (s *subscribers) remove(p *atomic.Uint64) {
	s.mu.Lock()
	delete(s.subs, p)
	s.mu.Unlock()
}

// filerCollector reads the event log's state at scrape time.
type filerCollector struct {
	s                        *Server
	lastSeq, subs, lag, sent *prometheus.Desc
}

func newFilerCollector(s *Server) *filerCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &filerCollector{
		s:       s,
		lastSeq: d("kelp_filer_event_last_seq", "Sequence number of the newest metadata event."),
		subs:    d("kelp_filer_event_subscribers", "Metadata event subscriptions open (gateways, filer.sync, filer.backup)."),
		lag:     d("kelp_filer_event_subscriber_lag", "Events the slowest subscriber has yet to receive."),
		sent:    d("kelp_filer_events_sent_total", "Metadata events sent to subscribers."),
	}
}

func (c *filerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.lastSeq
	ch <- c.subs
	ch <- c.lag
	ch <- c.sent
}

func (c *filerCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	last, err := c.s.filer.LastSeq(ctx)
	if err == nil {
		ch <- prometheus.MustNewConstMetric(c.lastSeq, prometheus.GaugeValue, float64(last))
	}
	subs := &c.s.subs
	subs.mu.Lock()
	n := len(subs.subs)
	var lag uint64
	for p := range subs.subs {
		if at := p.Load(); last > at {
			lag = max(lag, last-at)
		}
	}
	subs.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(c.subs, prometheus.GaugeValue, float64(n))
	if err == nil {
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(lag))
	}
	ch <- prometheus.MustNewConstMetric(c.sent, prometheus.CounterValue, float64(subs.sent.Load()))
}
